"""Operator-wide settings: our own annotation prefixes and finalizer, sane timeouts, probes, how
long a shutdown may take (``MCP_SHUTDOWN_TIMEOUT_SECONDS``: kopf's ultimate exiting timeout; see
``handlers.lifecycle``), and the object a log line is about (:func:`current_object`, set by
every handler: ``handlers.common.about_object``)."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from mcp_bench import dialguard

from .. import metrics
from ..leadership import leader_identity
from ..policy import TargetPolicy
from ..settings import OperatorSettings
from .common import current_object

__all__ = ["PREFIX", "api_reachable", "configure", "current_object", "leader"]

PREFIX = "mcp2026.io"


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
