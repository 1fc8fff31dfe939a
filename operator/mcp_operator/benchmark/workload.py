"""What ``spec.workload`` adds to the plan's payload, and the dataset volume the Job mounts.

The API models map 1:1 onto the plan's (``api.workload``), so this module only places them:
synthetic prompts and a dataset become the plan's ``payload.workload``, images and image tensors
``payload.images`` and ``payload.image_tensor`` (per class too). A dataset is read in the shard
pod from a volume the Job mounts read-only at :data:`DATASET_DIR` (a ConfigMap key or a file on
a PersistentVolumeClaim), so the plan names its path there.
"""

from __future__ import annotations

import posixpath
from typing import Any

from ..api.benchmark import MCPBenchmarkSpec
from ..api.classes import BenchmarkWorkload, RequestClassSpec
from ..api.workload import DatasetSpec

DATASET_DIR = "/var/run/mcp-bench/dataset"
DATASET_VOLUME = "dataset"
CONFIGMAP_FILE = "dataset.jsonl"


def dataset_path(dataset: DatasetSpec) -> str:
    """Where the shard reads the dataset: the mounted ConfigMap's one item, or the file on the volume."""
    if dataset.persistent_volume_claim is not None:
        return posixpath.join(DATASET_DIR, dataset.persistent_volume_claim.path)
    return posixpath.join(DATASET_DIR, CONFIGMAP_FILE)


def dataset_volume(spec: MCPBenchmarkSpec) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The pod volume and the container's mount for the spec's dataset, or None without one."""
    dataset = spec.workload.dataset if spec.workload is not None else None
    if dataset is None:
        return None
    volume: dict[str, Any] = {"name": DATASET_VOLUME}
    if dataset.config_map is not None:
        volume["configMap"] = {
            "name": dataset.config_map.name,
            "items": [{"key": dataset.config_map.key, "path": CONFIGMAP_FILE}],
        }
    elif dataset.persistent_volume_claim is not None:
        volume["persistentVolumeClaim"] = {
            "claimName": dataset.persistent_volume_claim.claim_name,
            "readOnly": True,
        }
    mount = {"name": DATASET_VOLUME, "mountPath": DATASET_DIR, "readOnly": True}
    return volume, mount


def _prompts(wl: BenchmarkWorkload) -> dict[str, Any] | None:
    """The plan's ``payload.workload``: a dataset, synthetic prompts, or None (the fixed prompt)."""
    if wl.dataset is not None:
        return {
            "kind": "dataset",
            "path": dataset_path(wl.dataset),
            "default_max_tokens": wl.dataset.default_max_tokens,
        }
    if wl.input_tokens is None and wl.output_tokens is None and wl.shared_prefix_ratio is None:
        return None
    out: dict[str, Any] = {"kind": "synthetic"}
    if wl.input_tokens is not None:
        out["input_tokens"] = wl.input_tokens.to_plan()
    if wl.output_tokens is not None:
        out["output_tokens"] = wl.output_tokens.to_plan()
    elif wl.max_output_tokens is not None:
        out["output_tokens"] = {"kind": "fixed", "value": wl.max_output_tokens}
    if wl.shared_prefix_ratio is not None:
        out["shared_prefix_ratio"] = wl.shared_prefix_ratio
    if wl.seed is not None:
        out["seed"] = wl.seed
    return out


def plan_class(c: RequestClassSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": c.name,
        "weight": c.weight,
        "priority": c.priority,
        "latency_p99_ms": c.latency_p99_ms,
    }
    if c.images is not None:
        out["images"] = c.images.to_plan()
    if c.image_tensor is not None:
        out["image_tensor"] = c.image_tensor.to_plan()
    for key, value in (("backend", c.backend), ("path", c.path), ("model", c.model)):
        if value is not None:  # a mix's class (the plan refuses them on any other backend)
            out[key] = value
    return out


def workload_payload(spec: MCPBenchmarkSpec) -> dict[str, Any]:
    """The plan's payload fields for ``spec.workload``."""
    wl = spec.workload
    if wl is None:
        return {}
    out: dict[str, Any] = {}
    if (prompts := _prompts(wl)) is not None:
        out["workload"] = prompts
    if wl.classes:
        out["classes"] = [plan_class(c) for c in wl.classes]
    if wl.shape_sweep is not None:
        out["shape_sweep"] = {
            "input_tokens": list(wl.shape_sweep.input_tokens),
            "repeats": wl.shape_sweep.repeats,
        }
    if wl.max_output_tokens is not None:
        out["max_output_tokens"] = wl.max_output_tokens
    if wl.images is not None:
        out["images"] = wl.images.to_plan()
    if wl.image_tensor is not None:
        out["image_tensor"] = wl.image_tensor.to_plan()
    return out
