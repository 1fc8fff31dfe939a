"""What the config consistency check compares: the config objects, the workload that mounts
them, and optionally the Argo CD Application that deploys both."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..defaults import ARGO_CD_NAMESPACE, CONFIG_TIMEOUT_S, DEFAULT_ANNOTATION

__all__ = ["DEFAULT_ANNOTATION", "FULL_SHA", "ArgoApplicationRef", "ConfigConsistencySpec", "WorkloadKind"]

FULL_SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")


class WorkloadKind(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"


@dataclass(frozen=True)
class ArgoApplicationRef:
    """An Argo CD Application (argoproj.io/v1alpha1). ``gate_wave`` is the sync wave the gate
    itself runs in: resources of that wave or earlier must be Synced and Healthy.
    ``gate_resource`` ("Kind/name") is left out of that test, since it is the gate."""

    name: str
    namespace: str = ARGO_CD_NAMESPACE
    expected_revision: str | None = None
    gate_wave: int | None = None
    gate_resource: str | None = None


@dataclass(frozen=True)
class ConfigConsistencySpec:
    namespace: str
    workload: str
    config_maps: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    workload_kind: WorkloadKind = WorkloadKind.DEPLOYMENT
    annotation: str = DEFAULT_ANNOTATION
    application: ArgoApplicationRef | None = None
    timeout_s: float = CONFIG_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.config_maps and not self.secrets:
            raise ValueError("name at least one ConfigMap or Secret to hash")
        if not self.annotation:
            raise ValueError("the checksum annotation name must not be empty")
