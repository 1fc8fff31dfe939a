"""Shard pods' logs as honest shards leave them, for tests of the collector's other checks.

Each pod of the run attests the document its index's result object holds: what the objects
hold is then what the pods wrote, and every rejection a test sees comes from the check it is
about. Tests of the attestation itself build their logs by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mcp_operator.benchmark.attestation import PodLog, attestation_line
from mcp_operator.benchmark.collect import PublishedObject
from mcp_operator.benchmark.contract import shard_object_name


def honest_logs(pods: Mapping[str, int], job: str, objects: Iterable[PublishedObject]) -> dict[str, PodLog]:
    """Pod UID -> a log whose last line attests what the pod's index's object holds."""
    held = {o.name: o.text for o in objects}
    logs = {}
    for uid, index in pods.items():
        text = held.get(shard_object_name(job, index))
        logs[uid] = PodLog(f"starting\n{attestation_line(text)}\n" if text else "starting\n")
    return logs
