"""An MCPReadiness manifest as ``mcp-check -f`` reads it: as strictly as the API server.

``kubectl apply`` refuses a misspelt field; a manifest read here must be refused too, or a typo
such as ``minSucessRatio`` runs the check with the default threshold instead of the one meant.
The parts of the spec that ``mcp-check`` runs (``target`` and ``checks``) are validated through
the check models of ``mcp_checks.specs``, the ones the operator's CRD is generated from; the
parts only the operator runs are known by name (an unknown spec field is still an error) and
their insides left to the API server. Each problem is reported with its field path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from .specs import CheckSpec, ConfigConsistency, HealthProbe, MetricDrift, XdsSync

__all__ = ["ReadinessChecks", "ReadinessSpec", "ReadinessTarget", "ServiceRef", "problems", "spec_problems"]

MAX_SHOWN = 200  # characters of a rejected value quoted in a message


class ServiceRef(CheckSpec):
    name: str = Field(min_length=1, max_length=63)
    namespace: str | None = None
    port: int = Field(default=80, ge=1, le=65535)
    scheme: Literal["http", "https"] = "http"


class ReadinessTarget(CheckSpec):
    url: str | None = Field(default=None, pattern=r"^https?://[^\s/]+(/.*)?$", max_length=2048)
    service_ref: ServiceRef | None = None

    @model_validator(mode="after")
    def _one_target(self) -> ReadinessTarget:
        if (self.url is None) == (self.service_ref is None):
            raise ValueError("set exactly one of url and serviceRef")
        return self


class ReadinessChecks(CheckSpec):
    health_probe: HealthProbe | None = None
    xds_sync: XdsSync | None = None
    config_consistency: ConfigConsistency | None = None
    metric_drift: MetricDrift | None = None


class ReadinessSpec(CheckSpec):
    """``spec`` of an MCPReadiness; the operator-only parts are objects the API server checks."""

    target: ReadinessTarget
    checks: ReadinessChecks = Field(default_factory=ReadinessChecks)
    suspend: bool = False
    recheck_interval_seconds: int | None = Field(default=None, ge=10, le=86400)
    pod_readiness_gate: dict[str, Any] | None = None
    drill: dict[str, Any] | None = None
    release: str | None = Field(default=None, max_length=256)
    watch: dict[str, Any] | None = None


def _path(prefix: str, loc: Sequence[int | str]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "(top)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN]}... ({len(text)} characters)"


def problems(exc: ValidationError, prefix: str = "") -> list[str]:
    """Each error of a validation as ``path: what is wrong``, the path as the manifest spells it
    (``spec.checks.healthProbe.minSucessRatio: unknown field``)."""
    out = []
    for error in exc.errors():
        path = _path(prefix, error["loc"])
        if error["type"] == "extra_forbidden":
            out.append(f"{path}: unknown field")
        elif error["type"] == "missing":
            out.append(f"{path}: required")
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            out.append(f"{path}: {message}, got {_shown(error['input'])}")
    return out


def spec_problems(spec: object) -> list[str]:
    """What the API server would refuse in this ``spec`` (of the parts ``mcp-check`` reads); empty:
    none."""
    try:
        ReadinessSpec.model_validate(spec)
    except ValidationError as exc:
        return problems(exc, "spec")
    return []
