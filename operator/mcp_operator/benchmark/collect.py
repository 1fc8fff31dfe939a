"""Read shard results back and decide which ones count. A CRC only catches accidents, so a
result counts only when all of this holds:

* it is the object the operator named for an expected index (``<job>-shard-<i>``, i < shards),
  owned by the MCPBenchmark;
* its document is signed (HMAC-SHA256) with the run's key, which only the operator and the
  run's pods can read, and its checksum and shape are right;
* the signed origin names this run (the MCPBenchmark's UID and the Job) and a pod of the Job
  whose completion index is ``i``, and the document says it is shard ``i``;
* that pod's own log attests exactly this document (``attestation``): a Secret reader can sign
  with the run's key, but cannot write the shard container's stdout;
* no other result for ``i`` was accepted.

Anything else is rejected with the reason and never merged; an object the run did not expect
(more results than shards) is a finding too. Failed shard pods say why in their termination
message, or, killed for memory, in their container's status (``OOMKilled``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_bench.api import (
    ChecksumMismatchError,
    DocumentFormatError,
    ResultDocument,
    SignatureMismatchError,
    loads_document,
)

from ..redact import redact_text
from .attestation import PodLog, attestation_problem
from .contract import (
    ANNOTATION_COMPLETION_INDEX,
    ORIGIN_JOB,
    ORIGIN_POD_UID,
    ORIGIN_RUN_UID,
    shard_index_of,
    shard_object_name,
)


@dataclass(frozen=True)
class RunIdentity:
    """What a result must match: the MCPBenchmark's UID, its Job, the shard count, the run's key
    (None when the key Secret is gone: then nothing can be verified), the Job's pods by UID with
    their completion index, and those pods' logs by UID (a pod missing there is not attested)."""

    uid: str
    job: str
    shards: int
    key: bytes | None
    pods: dict[str, int]
    logs: Mapping[str, PodLog]


@dataclass(frozen=True)
class PublishedObject:
    name: str
    owners: frozenset[str]  # ownerReferences UIDs
    text: str | None  # the result key's value; None while the shard has not published


@dataclass
class ShardReadout:
    documents: list[ResultDocument] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # object name -> why


def _verify(run: RunIdentity, obj: PublishedObject, accepted: set[int]) -> ResultDocument | str:
    """The document when it counts for its index, else why not."""
    index = shard_index_of(run.job, obj.name)
    if index is None or index >= run.shards:
        last = shard_object_name(run.job, run.shards - 1)
        return f"unexpected result object: the run has {run.shards} shard(s), up to {last}"
    if run.uid not in obj.owners:
        return "not owned by this MCPBenchmark"
    if run.key is None:
        return "the run's key Secret is missing, so no result can be verified"
    try:
        doc = loads_document(obj.text or "", run.key)
    except SignatureMismatchError as exc:
        return f"signature: {exc}"
    except ChecksumMismatchError as exc:
        return f"checksum: {exc}"
    except DocumentFormatError as exc:
        return f"format: {exc}"
    origin = doc.origin
    if origin.get(ORIGIN_RUN_UID) != run.uid or origin.get(ORIGIN_JOB) != run.job:
        return f"written for another run (job {origin.get(ORIGIN_JOB)!r})"
    if doc.shard_index != index:
        return f"holds shard {doc.shard_index}'s result, not shard {index}'s"
    pod_uid = origin.get(ORIGIN_POD_UID, "")
    if run.pods.get(pod_uid) != index:
        return f"not written by a pod of Job {run.job} with index {index}"
    unattested = attestation_problem(run.logs.get(pod_uid), obj.text or "")
    if unattested is not None:
        return unattested
    if index in accepted:
        return f"duplicate result for shard {index}"
    return doc


def read_shards(run: RunIdentity, objects: list[PublishedObject]) -> ShardReadout:
    """Every result that counts (by index) and every one rejected, with why; an expected object
    the shard has not filled in yet is neither (it is missing)."""
    readout = ShardReadout()
    accepted: dict[int, ResultDocument] = {}
    for obj in sorted(objects, key=lambda o: o.name):
        index = shard_index_of(run.job, obj.name)
        if obj.text is None and index is not None and index < run.shards:
            continue
        if obj.text == "":
            readout.rejected[obj.name] = "empty result"
            continue
        verdict = _verify(run, obj, set(accepted))
        if isinstance(verdict, str):
            readout.rejected[obj.name] = verdict
            continue
        verdict.plan = verdict.plan.shown()
        accepted[int(verdict.shard_index or 0)] = verdict
    readout.documents = [accepted[i] for i in sorted(accepted)]
    return readout


def pod_indices(pods: list[Any], job_uid: str) -> dict[str, int]:
    """UID -> completion index of the pods the Job controls (a pod merely labelled like them,
    or one of another Job, does not count)."""
    indices = {}
    for pod in pods:
        owners = pod.metadata.owner_references or []
        if not any(o.controller and o.uid == job_uid for o in owners):
            continue
        index = (pod.metadata.annotations or {}).get(ANNOTATION_COMPLETION_INDEX, "")
        if index.isdigit():
            indices[pod.metadata.uid] = int(index)
    return indices


OOM_KILLED = "OOMKilled"  # the kubelet's reason for a container the kernel killed at its memory limit


@dataclass(frozen=True)
class PodFailure:
    """A failed shard pod: ``text`` is ``pod: why`` (redacted, for the status and the event),
    ``index`` its completion index (None without one), ``oom_killed`` whether its container was
    killed for memory (its log tail then says nothing of it)."""

    text: str
    index: int | None = None
    oom_killed: bool = False


def _memory_limit(pod: Any, container: str) -> str | None:
    """The memory limit the pod's spec gives ``container``, None when it has none."""
    containers = pod.spec.containers if pod.spec is not None else None
    for spec in containers or []:
        if spec.name == container and spec.resources is not None and spec.resources.limits:
            memory = spec.resources.limits.get("memory")
            return str(memory) if memory else None
    return None


def _oom_detail(pod: Any, container: str, exit_code: int) -> str:
    limit = _memory_limit(pod, container)
    if limit is None:
        return f"{OOM_KILLED} (exit {exit_code}) with no memory limit set: the node ran short of memory"
    return f"{OOM_KILLED} (exit {exit_code}) at its memory limit {limit}; raise spec.runner.memoryLimit"


def pod_failures(pods: list[Any]) -> list[PodFailure]:
    """Every failed shard pod and why: killed for memory (``OOMKilled``, with the exit code and
    the container's memory limit), else the last line of its termination message (the shard
    writes why it failed there; the kubelet falls back to the log tail)."""
    failures = []
    for pod in pods:
        if pod.status.phase != "Failed":
            continue
        index = (pod.metadata.annotations or {}).get(ANNOTATION_COMPLETION_INDEX, "")
        for container in pod.status.container_statuses or []:
            terminated = container.state.terminated if container.state else None
            if terminated is None or not terminated.exit_code:
                continue
            oom = terminated.reason == OOM_KILLED
            if oom:
                detail = _oom_detail(pod, container.name, terminated.exit_code)
            else:
                text = (terminated.message or terminated.reason or "").strip().splitlines()
                detail = text[-1] if text else f"exit code {terminated.exit_code}"
            failures.append(
                PodFailure(
                    text=redact_text(f"{pod.metadata.name}: {detail[:300]}"),
                    index=int(index) if index.isdigit() else None,
                    oom_killed=oom,
                )
            )
    return failures
