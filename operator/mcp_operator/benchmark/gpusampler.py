"""Pure builders of the serving GPUs' samplers (``spec.observe.gpuSampler``).

One short-lived pod per node that runs the target's pods: pinned to that node by node affinity
(``metadata.name``), tolerating the node's taints (it must land where the server runs), asking
for no GPU (so it takes none from the server), and reading NVML through the host's device files
and driver library (hostPath, read-only). Opening device files a pod was not allocated needs the
device cgroup opened, so the container is privileged where there are GPUs to read, and locked
down like a shard where there are none (it then reports ``unavailable``, and why). Each sampler
has a Service of its own, so the shards reach it by a stable address; both are owned by the
MCPBenchmark and deleted when the run is collected. The shards tell it when they are done; its
own deadline and the pod's ``activeDeadlineSeconds`` bound it if they never do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_bench.api import ServingGpus

from ..api.observe import GpuSamplerSpec
from ..bounded import clip
from ..children import bounded_name
from .contract import LABEL_COMPONENT, LABEL_JOB, benchmark_labels, benchmark_owner

COMPONENT_SAMPLER = "gpu-sampler"
LABEL_SAMPLER = "mcp2026.io/gpu-sampler"  # the sampler's own name: its Service selects it alone
SAMPLER_PORT = 9401
LIBRARY_DIR = "/run/mcp-nvml"  # where the driver's NVML library is mounted in the container
GPU_RESOURCE = "nvidia.com/gpu"
DEADLINE_MARGIN_S = 120  # the sampler outlives the shards' own deadline by this much at most
MAX_NAME = 63  # a Service name is a DNS-1035 label

LOCKED_DOWN: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
# device files of GPUs this pod was not allocated: only a privileged container may open them
DEVICE_READER: dict[str, Any] = {"privileged": True, "readOnlyRootFilesystem": True}


def sampler_name(job: str, node: str) -> str:
    """``<job>-gs-<digest of the node>``: unique per run and node, a DNS label."""
    digest = hashlib.sha256(f"{job}/{node}".encode()).hexdigest()[:10]
    return f"{bounded_name(job, MAX_NAME - 14)}-gs-{digest}"


def serving_nodes(slices: Iterable[Mapping[str, Any]]) -> list[str]:
    """The nodes of a Service's endpoints (EndpointSlices as the API returns them), sorted."""
    nodes = {
        str(ep["nodeName"])
        for s in slices
        for ep in (s.get("endpoints") or [])
        if isinstance(ep, Mapping) and ep.get("nodeName")
    }
    return sorted(nodes)


def node_gpus(node: Mapping[str, Any]) -> int:
    """GPUs a node advertises (its capacity of nvidia.com/gpu); 0 when it advertises none."""
    value = str(((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE, "0"))
    return int(value) if value.isdigit() else 0


def _volumes(gpus: int, library: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """hostPath volumes and mounts: the control device, one device per GPU, the NVML library."""
    if gpus <= 0:
        return [], []
    devices = ["nvidiactl", *(f"nvidia{i}" for i in range(gpus))]
    volumes: list[dict[str, Any]] = [
        {"name": f"dev-{d}", "hostPath": {"path": f"/dev/{d}", "type": "CharDevice"}} for d in devices
    ]
    mounts: list[dict[str, Any]] = [{"name": f"dev-{d}", "mountPath": f"/dev/{d}"} for d in devices]
    volumes.append({"name": "nvml", "hostPath": {"path": library, "type": "File"}})
    mounts.append({"name": "nvml", "mountPath": f"{LIBRARY_DIR}/libnvidia-ml.so.1", "readOnly": True})
    return volumes, mounts


def sampler_pod(
    *,
    benchmark: str,
    uid: str,
    job: str,
    node: str,
    gpus: int,
    spec: GpuSamplerSpec,
    image: str,
    command: tuple[str, ...] = ("mcp-bench", "gpu-sampler"),
    clients: int,
    deadline_s: int,
) -> dict[str, Any]:
    """The sampler pod of one node (``gpus``: what the node advertises, 0 for none)."""
    name = sampler_name(job, node)
    volumes, mounts = _volumes(gpus, spec.driver_library_path)
    env: list[dict[str, Any]] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    if gpus > 0:
        env.append({"name": "LD_LIBRARY_PATH", "value": LIBRARY_DIR})
    args = [
        "--host",
        "$(POD_IP)",
        "--port",
        str(SAMPLER_PORT),
        "--interval",
        f"{spec.interval_seconds:g}",
        "--node",
        "$(NODE_NAME)",
        "--clients",
        str(clients),
        "--deadline",
        str(deadline_s + DEADLINE_MARGIN_S // 2),
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                **benchmark_labels(benchmark, uid),
                LABEL_JOB: job,
                LABEL_COMPONENT: COMPONENT_SAMPLER,
                LABEL_SAMPLER: name,
            },
            "ownerReferences": [benchmark_owner(benchmark, uid)],
        },
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline_s + DEADLINE_MARGIN_S,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "affinity": affinity,
            "tolerations": [{"operator": "Exists"}],
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "sampler",
                    "image": image,
                    "command": [*command, *args],
                    "env": env,
                    "ports": [{"name": "sampler", "containerPort": SAMPLER_PORT}],
                    # no GPU: the sampler reads the server's GPUs and takes none of them
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "128Mi"},
                        "limits": {"memory": "1Gi"},
                    },
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": DEVICE_READER if gpus > 0 else LOCKED_DOWN,
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }


def sampler_service(*, benchmark: str, uid: str, job: str, node: str) -> dict[str, Any]:
    """The Service the shards reach one sampler through."""
    name = sampler_name(job, node)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "labels": {
                **benchmark_labels(benchmark, uid),
                LABEL_JOB: job,
                LABEL_COMPONENT: COMPONENT_SAMPLER,
            },
            "ownerReferences": [benchmark_owner(benchmark, uid)],
        },
        "spec": {
            "selector": {LABEL_SAMPLER: name},
            "ports": [{"name": "sampler", "port": SAMPLER_PORT, "targetPort": SAMPLER_PORT}],
        },
    }


def sampler_url(service: Mapping[str, Any], namespace: str) -> str:
    """The URL a shard reaches a sampler at: its ClusterIP where assigned, else its DNS name."""
    ip = (service.get("spec") or {}).get("clusterIP")
    name = service["metadata"]["name"]
    host = ip if ip and ip != "None" else f"{name}.{namespace}.svc"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{SAMPLER_PORT}"


def serving_columns(serving: ServingGpus | None, limit: int = 512) -> dict[str, str]:
    """A status row's serving-GPU columns (none where the serving GPUs were not observed): the
    figures or ``unavailable``, and the sources, or why each source gave nothing."""
    if serving is None:
        return {}

    def figure(value: float | None, digits: int) -> str:
        return "unavailable" if value is None else f"{value:.{digits}f}"

    said = [f"{', '.join(serving.sources)} ({serving.gpus} GPU(s))"] if serving.sources else []
    said += [f"unavailable: {why}" for why in serving.unavailable]
    source = "; ".join(said)
    return {
        "serving_gpu_memory_peak_percent": figure(serving.memory_peak_pct, 1),
        "serving_gpu_util_percent": figure(serving.sm_util_mean_pct, 1),
        "serving_gpu_power_watts": figure(serving.power_mean_w, 1),
        "serving_gpu_source": clip(source, limit),
    }
