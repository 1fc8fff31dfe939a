"""Operator configuration from the environment, so the Deployment and the CLI agree."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# what kubernetes' in-cluster config reads: the variable the kubelet sets in every container, and
# the service account's token
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
CLUSTER_DOMAIN = "cluster.local"


@dataclass(frozen=True)
class OperatorSettings:
    metrics_port: int
    runner_image: str
    runner_command: tuple[str, ...]
    metrics_address: str = "0.0.0.0"
    # who may choose a shard pod's image and service account: fnmatch patterns, "*" for any;
    # empty: only the operator's own runner image and the per-run account
    runner_image_allow: tuple[str, ...] = ()
    runner_account_allow: tuple[str, ...] = ()
    # measuring rounds at once (worker processes), and at once against one target
    max_concurrent_checks: int = 4
    max_checks_per_target: int = 2
    # gates' rounds run at once (each from its first read to its verdict); the rest wait in order
    max_rounds_admitted: int = 32
    # after SIGTERM: how long the operator may take to stop before it kills itself; keep it
    # below the pod's terminationGracePeriodSeconds (the manifests give 60 against 45)
    shutdown_timeout_seconds: float = 45.0
    # how often the free heap goes back to the system (``heap``); 0: never
    heap_trim_seconds: float = 10.0

    @classmethod
    def from_env(cls) -> OperatorSettings:
        # one probing process per two cores: more, and the probers' own lag bends what they measure
        default_checks = str(max(1, (os.cpu_count() or 2) // 2))
        command = os.environ.get("MCP_RUNNER_COMMAND", "mcp-operator shard")
        return cls(
            metrics_port=int(os.environ.get("MCP_METRICS_PORT", "9090")),
            runner_image=os.environ.get("MCP_RUNNER_IMAGE", "ghcr.io/mcp2026/mcp-operator:0.1.0"),
            runner_command=tuple(command.split()),
            metrics_address=os.environ.get("MCP_METRICS_ADDRESS", "0.0.0.0"),
            runner_image_allow=_list(os.environ.get("MCP_RUNNER_IMAGE_ALLOW", "")),
            runner_account_allow=_list(os.environ.get("MCP_RUNNER_SERVICE_ACCOUNT_ALLOW", "")),
            max_concurrent_checks=max(1, int(os.environ.get("MCP_MAX_CONCURRENT_CHECKS", default_checks))),
            max_checks_per_target=max(1, int(os.environ.get("MCP_MAX_CHECKS_PER_TARGET", "2"))),
            max_rounds_admitted=max(1, int(os.environ.get("MCP_MAX_ROUNDS_ADMITTED", "32"))),
            shutdown_timeout_seconds=max(1.0, float(os.environ.get("MCP_SHUTDOWN_TIMEOUT_SECONDS", "45"))),
            heap_trim_seconds=max(0.0, float(os.environ.get("MCP_HEAP_TRIM_SECONDS", "10"))),
        )


def in_cluster(environ: Mapping[str, str] | None = None, token: Path | None = None) -> bool:
    """Whether the operator runs in a pod of a cluster (``KUBERNETES_SERVICE_HOST`` set, or a
    service account token mounted: what the Kubernetes client's in-cluster config needs) rather
    than outside it (``mcp-operator run`` with a kubeconfig), where the cluster's DNS names do
    not resolve (``policy.TargetPolicy``)."""
    environ = os.environ if environ is None else environ
    return bool(environ.get(SERVICE_HOST_ENV)) or (token or SERVICE_ACCOUNT_TOKEN).is_file()


def cluster_domain_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The cluster's DNS domain (``MCP_CLUSTER_DOMAIN``, default ``cluster.local``): names under
    ``.svc.<domain>`` are the cluster's own."""
    environ = os.environ if environ is None else environ
    return environ.get("MCP_CLUSTER_DOMAIN", "").strip().strip(".").lower() or CLUSTER_DOMAIN


def _list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())
