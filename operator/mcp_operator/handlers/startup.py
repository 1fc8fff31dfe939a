"""Operator-wide settings: our own annotation prefixes and finalizer, sane timeouts, probes, how
long a shutdown may take (``MCP_SHUTDOWN_TIMEOUT_SECONDS``: kopf's ultimate exiting timeout; see
``handlers.lifecycle``), and the object a log line is about (:func:`current_object`)."""

from __future__ import annotations

import contextvars
import importlib
import logging
from typing import Any

import kopf

from mcp_bench import dialguard

from .. import logs, metrics
from ..leadership import leader_identity
from ..policy import TargetPolicy
from ..settings import OperatorSettings

PREFIX = "mcp2026.io"


def _kopf_cause_var() -> contextvars.ContextVar[Any] | None:
    """kopf's context variable holding the cause of the handler that runs (what ``kopf.adopt``
    reads); None should a kopf release move it, and the logs then go without that context."""
    try:
        module = importlib.import_module("kopf._core.actions.execution")
    except ImportError:
        return None
    var = getattr(module, "cause_var", None)
    return var if isinstance(var, contextvars.ContextVar) else None


_CAUSE = _kopf_cause_var()


def current_object() -> logs.ObjectRef | None:
    """The object whose handler is running in this context (a task it started inherits it)."""
    if _CAUSE is None:
        return None
    cause = _CAUSE.get(None)
    return logs.ref_from_body(getattr(cause, "body", None))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
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
    settings.posting.reporting_component = "mcp-operator"  # events name us, not the framework
    settings.execution.max_workers = 8
    settings.process.ultimate_exiting_timeout = operator.shutdown_timeout_seconds
    metrics.serve(operator.metrics_port, operator.metrics_address)
    # the engine's clients in this process (the benchmark preflight's) check what they connect to
    dialguard.install(TargetPolicy.from_env().rule)


@kopf.on.probe(id="api")
def api_reachable(**_: Any) -> str:
    """Liveness reports the watch loop is alive; kopf itself answers only while it runs."""
    return "ok"


@kopf.on.probe(id="leader")
def leader(**_: Any) -> str:
    """Who leads: this process (kopf runs only in the holder of the Lease); a standby's own
    endpoint answers with the holder it sees (``leadership.standby``)."""
    return leader_identity() or ""
