"""What the rest of the operator uses of a benchmark run (a drill stage's shard Jobs run as an
MCPBenchmark of its own): when its first level started, its verified result, and a request
class as its plan has it. The modules behind these (the barrier, the run's contract, reconcile,
the report) may change; these functions stay."""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from .. import kube
from .barrier import parse_starts
from .contract import START_KEY, start_object_name
from .reconcile import read_run_key
from .report import read_report
from .workload import plan_class

__all__ = ["first_level_start", "plan_class", "read_report"]


async def first_level_start(namespace: str, job: str) -> int | None:
    """When the run's first level starts (Unix ns), as the operator signed it into the run's start
    object; None while there is none (not written yet, or not signed with the run's key)."""
    try:
        start = await kube.call(kube.core().read_namespaced_config_map, start_object_name(job), namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    key = await read_run_key(namespace, job)
    return parse_starts((start.data or {}).get(START_KEY), key).get(0)
