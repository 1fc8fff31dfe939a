"""Operator-wide settings: our own annotation prefixes and finalizer, sane timeouts, probes, how
long a shutdown may take (``MCP_SHUTDOWN_TIMEOUT_SECONDS``: kopf's ultimate exiting timeout; see
``handlers.lifecycle``), kopf's retried API requests logged as retries (the object a log line is
about is ``handlers.common.current_object``, set by every handler)."""

from __future__ import annotations

import logging
import re
from typing import Any

import kopf

from mcp_bench.api import dialguard

from .. import metrics
from ..api.common import REPORTING_COMPONENT
from ..leadership import leader_identity
from ..settings import OperatorSettings
from ..targets.policy import TargetPolicy
from ..targets.unresolved import LOOKING_AGAIN

__all__ = [
    "PREFIX",
    "ApiRetryFilter",
    "api_reachable",
    "configure",
    "leader",
    "quiet_retries",
]

PREFIX = "mcp2026.io"
# kopf's line for a failed API request it tries again (kopf._cogs.clients.api.request)
_RETRY = re.compile(
    r"Request attempt (?P<attempt>\S+) failed; will retry: (?P<what>.*?) -> (?P<error>.*)", re.S
)
_STATUS = re.compile(r"status=(\d+)\)\s*$")
STARTING = "storage is (re)initializing"  # the API server's 429 while its watch cache fills
# kopf's line for a handler that waits for a name to resolve (handlers.common.wait_for_names)
_WAITING = re.compile(r"Handler '[^']*' failed temporarily: .*" + re.escape(LOOKING_AGAIN), re.S)
# handlers kopf calls on every watch event of every object: their success is no news
QUIET_HANDLERS = ("track_readiness",)
_ROUTINE = re.compile(r"Handler '(?:" + "|".join(map(re.escape, QUIET_HANDLERS)) + r")' succeeded\.")


class ApiRetryFilter(logging.Filter):
    """kopf logs every failed attempt of an API request at ERROR, also those it tries again
    (``will retry``): at start-up an API server still filling its watch cache answers
    ``429 storage is (re)initializing`` and two ERROR lines looked like a failure. A retry is
    not an error: that 429 becomes an INFO line saying the API server is not ready yet, any
    other retried failure a WARNING; the last attempt (``escalating``) stays an ERROR. A handler
    waiting for a name to resolve is no error either: its Ready condition and one event say so,
    and kopf's line every 15 s for as long as the object lives (94 in 27 min) is DEBUG. So is the
    success of a handler called on every watch event (:data:`QUIET_HANDLERS`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and _ROUTINE.fullmatch(record.getMessage()):
            return self._debug(record)
        if record.levelno != logging.ERROR:
            return True
        if _WAITING.fullmatch(record.getMessage()):
            return self._debug(record)
        found = _RETRY.fullmatch(record.getMessage())
        if found is None:
            return True
        status = _STATUS.search(found["error"])
        code = f"{status.group(1)} " if status else ""
        if STARTING in found["error"]:
            level, why = logging.INFO, f"the API server is not ready for it yet ({code}{STARTING})"
        else:
            level, why = logging.WARNING, f"the API server answered {found['error']}"
        record.levelno, record.levelname = level, logging.getLevelName(level)
        record.msg = f"retrying {found['what']}: {why}; attempt {found['attempt']} failed"
        record.args = None
        return True

    @staticmethod
    def _debug(record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def quiet_retries() -> list[str]:
    """Put :class:`ApiRetryFilter` on kopf's loggers (a logger's filter sees the records logged
    on it, before any handler or kopf's event poster); returns their names."""
    names = [name for name in logging.root.manager.loggerDict if name == "kopf" or name.startswith("kopf.")]
    installed = []
    for name in sorted(names):
        logger = logging.getLogger(name)
        if not any(isinstance(f, ApiRetryFilter) for f in logger.filters):
            logger.addFilter(ApiRetryFilter())
        installed.append(name)
    return installed


CANCELLATION_POLLING_S = 1.0


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    operator = OperatorSettings.from_env()
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.watching.server_timeout = 60
    settings.watching.client_timeout = 70
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = REPORTING_COMPONENT  # events name us, not the framework
    settings.execution.max_workers = 8
    # an object deleted while one of its timers runs (a benchmark's collect every 2 s) keeps its
    # finalizer until kopf sees that timer end: kopf looks every 60 s by default, which held a
    # deleted MCPBenchmark and all its children a minute more
    settings.background.cancellation_polling = CANCELLATION_POLLING_S
    settings.process.ultimate_exiting_timeout = operator.shutdown_timeout_seconds
    quiet_retries()
    metrics.serve(operator.metrics_port, operator.metrics_address)
    # the engine's clients in this process (the benchmark preflight's) check what they connect to
    dialguard.install(TargetPolicy.from_env().rule)


@kopf.on.probe(id="api")
async def api_reachable(**_: Any) -> str:
    """Liveness reports the watch loop is alive; kopf itself answers only while it runs."""
    return "ok"


@kopf.on.probe(id="leader")
async def leader(**_: Any) -> str:
    """Who leads: this process (kopf runs only in the holder of the Lease); a standby's own
    endpoint answers with the holder it sees (``leadership.standby``)."""
    return leader_identity() or ""
