"""Operator-wide settings: our own annotation prefixes and finalizer, sane timeouts, probes."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from .. import metrics
from ..settings import OperatorSettings

PREFIX = "mcp2026.io"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
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
    ours = OperatorSettings.from_env()
    metrics.serve(ours.metrics_port, ours.metrics_address)


@kopf.on.probe(id="api")
def api_reachable(**_: Any) -> str:
    """Liveness reports the watch loop is alive; kopf itself answers only while it runs."""
    return "ok"
