"""Shard results read back, verified and merged into status, from documents of real runs.

Every document here comes from ``mcp_bench.engines.run_plan`` loading the reference server on
127.0.0.1 for a fraction of a second, so the collector sees exactly what a shard publishes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes import client
from tests.operator.attested import honest_logs

from mcp_bench.engines import run_plan
from mcp_bench.results.document import ResultDocument, dumps_document, loads_document
from mcp_operator.api import MCPBenchmarkSpec, MCPBenchmarkStatus
from mcp_operator.benchmark.collect import PodFailure, PublishedObject, RunIdentity, pod_failures, read_shards
from mcp_operator.benchmark.contract import ANNOTATION_COMPLETION_INDEX, SHARD_CONTAINER, shard_object_name
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.status import Collected, merged_status
from mcp_operator.conditions import condition
from mcp_refserver import RunningServer

REQUESTS = 20
UID = "0f9c2a1e-5b7d-4c1e-9e51-3d8c6a7b2f10"
JOB = "bench-1a2b3c4d"
KEY = b"0123456789abcdef" * 4
S0, S1 = shard_object_name(JOB, 0), shard_object_name(JOB, 1)


def _name(index: int) -> str:
    return shard_object_name(JOB, index)


def _publish(doc: ResultDocument, index: int) -> str:
    """What shard ``index`` of the run publishes: its origin signed with the run's key."""
    doc.shard_index = index
    doc.origin = {"runUid": UID, "job": JOB, "pod": f"{JOB}-{index}-x", "podUid": f"pod-uid-{index}"}
    return dumps_document(doc, KEY)


def _run(expected: int, objects: list[PublishedObject]) -> RunIdentity:
    pods = {f"pod-uid-{i}": i for i in range(expected)}
    return RunIdentity(
        uid=UID, job=JOB, shards=expected, key=KEY, pods=pods, logs=honest_logs(pods, JOB, objects)
    )


def _read(texts: list[tuple[str, str | None]], expected: int = 2) -> Any:
    objects = [PublishedObject(name, frozenset({UID}), text) for name, text in texts]
    return read_shards(_run(expected, objects), objects)


def _spec(slo: dict[str, Any] | None = None, path: str = "/delay?ms=2") -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://placeholder", "path": path},
            "load": {"concurrency": [2], "requests": REQUESTS, "requestTimeoutSeconds": 5},
            "shards": 2,
            "slo": slo or {},
        }
    )


async def _shard_texts(server: RunningServer, spec: MCPBenchmarkSpec, shards: int = 2) -> list[str]:
    """Run every shard's plan against the server at once, as the Job's pods would."""
    plan = plan_from_spec(spec, server.url, "bench")
    docs = await asyncio.gather(*(run_plan(plan) for _ in range(shards)))
    return [_publish(doc, index) for index, doc in enumerate(docs)]


T0 = "2026-01-01T00:00:00Z"


def _collect(
    texts: list[tuple[str, str | None]], expected: int = 2, pod_failures: list[PodFailure] | None = None
) -> Collected:
    readout = _read(texts, expected)
    failed = len(pod_failures or [])
    return merged_status(
        expected=expected,
        succeeded=expected - failed,
        failed=failed,
        readout=readout,
        conditions=[],
        generation=3,
        now=T0,
        pod_failures=pod_failures,
    )


def _ready(collected: Collected) -> dict[str, Any]:
    ready = condition(collected.status["conditions"], "Ready")
    assert ready is not None
    assert ready["observedGeneration"] == 3
    # whatever the outcome, status only carries fields the CRD declares
    MCPBenchmarkStatus.model_validate(collected.status)
    return ready


def _tamper(text: str) -> str:
    """Change one digit of the completed count: still valid JSON, wrong checksum."""
    marker = '"completed":'
    at = text.index(marker) + len(marker)
    digit = text[at]
    assert digit.isdigit()
    return text[:at] + str((int(digit) + 1) % 10) + text[at + 1 :]


async def test_two_good_shards_merge(refserver: RunningServer) -> None:
    texts = await _shard_texts(refserver, _spec(slo={"latencyP99Ms": 5000}))
    collected = _collect([(S0, texts[0]), (S1, texts[1])])
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("True", "SloMet")
    status = collected.status
    assert status["shards"] == {"expected": 2, "reported": 2, "rejected": 0, "succeeded": 2, "failed": 0}
    assert status["phase"] == "Succeeded" and status["verdict"] == "Pass"
    (row,) = status["results"]
    # the merge is exact: both shards' requests, concurrency adds up across shards
    assert row["requests"] == 2 * REQUESTS and row["errors"] == 0
    assert row["level"] == "c=4" and row["slo"] == "Pass"
    merged = collected.merged
    assert merged is not None
    assert merged.levels[0].latency["e2e"].count == 2 * REQUESTS
    p99 = merged.levels[0].latency["e2e"].p99_ms
    assert p99 is not None and p99 >= 2.0  # the server sleeps 2 ms per request
    assert row["p99Ms"] == f"{p99:.2f}" == status["p99Ms"]
    assert status["throughputRps"] == row["throughputRps"]
    assert float(row["throughputRps"]) > 0
    assert row["gpuMemoryPeakPercent"] == "unavailable"  # no telemetry ran: never a zero
    assert status["engine"]["serverName"] == "mcp-refserver"
    complete = condition(status["conditions"], "Complete")
    assert complete is not None and complete["status"] == "True"


async def test_a_client_bound_level_is_said_in_its_row_and_the_message(
    refserver: RunningServer,
) -> None:
    """A shard whose client process ran near a full core flags its level; the merged row and the
    Ready message say so (the figures there measure the client as much as the server)."""
    plan = plan_from_spec(_spec(), refserver.url, "bench")
    flagged = plan.model_copy(
        update={"client_bound": plan.client_bound.model_copy(update={"cpu_share": 1e-6})}
    )
    docs = await asyncio.gather(run_plan(flagged), run_plan(plan))
    texts = [_publish(doc, index) for index, doc in enumerate(docs)]
    collected = _collect([(S0, texts[0]), (S1, texts[1])])
    ready = _ready(collected)
    (row,) = collected.status["results"]
    assert "worker 0: CPU" in row["clientBound"]
    assert "client-bound at c=4" in ready["message"]


async def test_no_slo_declared_is_measured_not_met(refserver: RunningServer) -> None:
    texts = await _shard_texts(refserver, _spec(), shards=1)
    collected = _collect([(S0, texts[0])], expected=1)
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("True", "Measured")
    assert collected.status["results"][0]["slo"] == ""


async def test_tampered_shard_is_rejected_and_never_merged(refserver: RunningServer) -> None:
    good, other = await _shard_texts(refserver, _spec())
    bad = _tamper(other)
    json.loads(bad)  # still JSON: only the checksum can tell
    collected = _collect([(S0, good), (S1, bad)])
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "ShardResultRejected")
    assert S1 in ready["message"] and "crc32c" in ready["message"]
    status = collected.status
    assert status["shards"]["reported"] == 1 and status["shards"]["rejected"] == 1
    assert status["verdict"] == "Error" and status["phase"] == "Failed"
    # only the good shard's requests appear in the figures
    assert status["results"][0]["requests"] == loads_document(good).levels[0].completed == REQUESTS


async def test_missing_shard_is_reported(refserver: RunningServer) -> None:
    (text,) = await _shard_texts(refserver, _spec(), shards=1)
    collected = _collect([(S0, text)], expected=2)
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "ShardResultMissing")
    assert "1 of 2 shards" in ready["message"]
    assert collected.status["shards"]["reported"] == 1
    assert collected.status["verdict"] == "Error"


async def test_slo_the_run_cannot_meet_fails(refserver: RunningServer) -> None:
    # every request sleeps 20 ms on the server, so a 1 ms P99 cannot hold
    texts = await _shard_texts(refserver, _spec(slo={"latencyP99Ms": 1}, path="/delay?ms=20"))
    collected = _collect([(S0, texts[0]), (S1, texts[1])])
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "SloMissed")
    assert "c=4" in ready["message"]
    assert collected.status["verdict"] == "Fail"
    assert collected.status["phase"] == "Succeeded"  # the run itself worked
    assert collected.status["results"][0]["slo"] == "Fail"
    assert float(collected.status["results"][0]["p99Ms"]) >= 20.0


async def test_cluster_wide_throughput_slo_is_checked(refserver: RunningServer) -> None:
    """A declared throughput objective must be judged, not dropped: no data is never a pass."""
    texts = await _shard_texts(refserver, _spec(slo={"throughputRps": 1_000_000}))
    collected = _collect([(S0, texts[0]), (S1, texts[1])])
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "SloMissed")


async def test_nothing_measured_is_not_a_pass(refserver: RunningServer) -> None:
    # every request answers 404 from the server: runs, but completes nothing
    texts = await _shard_texts(refserver, _spec(path="/no-such-path"), shards=1)
    collected = _collect([(S0, texts[0])], expected=1)
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "NothingMeasured")
    assert collected.status["results"][0]["errors"] == REQUESTS


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty result"),
        ("{not json", "format:"),
        ('{"a": 1}', "checksum:"),
        ('{"a": 1, "crc32c": "00000000"}', "checksum:"),
        ("[1, 2]", "format:"),
    ],
)
def test_unreadable_results_are_rejected_with_a_reason(text: str | None, why: str) -> None:
    readout = _read([(S0, text)], expected=1)
    assert readout.documents == []
    assert readout.rejected[S0].startswith(why)
    collected = _collect([(S0, text)], expected=1)
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "ShardResultRejected")
    assert "results" not in collected.status and collected.merged is None


def _pod(
    name: str,
    phase: str,
    code: int,
    message: str | None,
    *,
    reason: str = "Error",
    index: int | None = None,
    memory_limit: str | None = None,
) -> client.V1Pod:
    """A shard pod as the API server lists it once its container ended with ``code``."""
    terminated = client.V1ContainerStateTerminated(exit_code=code, message=message, reason=reason)
    status = client.V1ContainerStatus(
        name=SHARD_CONTAINER,
        image="x",
        image_id="",
        ready=False,
        restart_count=0,
        state=client.V1ContainerState(terminated=terminated),
    )
    limits = {"memory": memory_limit} if memory_limit is not None else None
    container = client.V1Container(
        name=SHARD_CONTAINER,
        image="x",
        resources=client.V1ResourceRequirements(requests={"memory": "32Mi"}, limits=limits),
    )
    annotations = {ANNOTATION_COMPLETION_INDEX: str(index)} if index is not None else None
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PodSpec(containers=[container]),
        status=client.V1PodStatus(phase=phase, container_statuses=[status]),
    )


def test_pod_failures_take_the_last_line_of_failed_pods_only() -> None:
    pods = [
        _pod("bench-0", "Failed", 4, "Traceback ...\nshard 0 could not publish its result: 403 Forbidden"),
        _pod("bench-1", "Succeeded", 0, "shard 1: result published"),
        _pod("bench-2", "Failed", 137, None, index=2),
    ]
    assert pod_failures(pods) == [
        PodFailure("bench-0: shard 0 could not publish its result: 403 Forbidden"),
        PodFailure("bench-2: Error", index=2),
    ]


def test_an_oom_killed_pod_says_so_with_its_exit_code_and_memory_limit() -> None:
    """FallbackToLogsOnError puts the log tail in the message; OOMKilled is only in the reason."""
    tail = "level c=8 running: 512 sent"
    pods = [
        _pod("bench-1-xyz", "Failed", 137, tail, reason="OOMKilled", index=1, memory_limit="64Mi"),
        _pod("bench-0-abc", "Failed", 137, tail, reason="OOMKilled", index=0),
    ]
    assert pod_failures(pods) == [
        PodFailure(
            "bench-1-xyz: OOMKilled (exit 137) at its memory limit 64Mi; raise spec.runner.memoryLimit",
            index=1,
            oom_killed=True,
        ),
        PodFailure(
            "bench-0-abc: OOMKilled (exit 137) with no memory limit set: the node ran short of memory",
            index=0,
            oom_killed=True,
        ),
    ]


OOM_TEXT = "bench-1-xyz: OOMKilled (exit 137) at its memory limit 64Mi; raise spec.runner.memoryLimit"


async def test_a_shard_oom_killed_before_it_published_fails_the_run(refserver: RunningServer) -> None:
    (text,) = await _shard_texts(refserver, _spec(), shards=1)
    other = PodFailure("bench-1-abc: shard 1 could not publish its result: 403 Forbidden", index=1)
    killed = PodFailure(OOM_TEXT, index=1, oom_killed=True)
    collected = _collect([(S0, text)], expected=2, pod_failures=[other, killed])
    ready = _ready(collected)
    assert (ready["status"], ready["reason"]) == ("False", "ShardFailed")
    # the OOM kill comes first, whatever the order of the pods
    assert ready["message"] == (
        f"1 of 2 shards published a result (0 pods succeeded, 2 failed); {OOM_TEXT}; {other.text}"
    )
    failed = condition(collected.status["conditions"], "Failed")
    assert failed is not None and (failed["status"], failed["reason"]) == ("True", "ShardFailed")
    assert collected.status["verdict"] == "Error" and collected.status["phase"] == "Failed"
    assert (collected.reason, collected.ready) == ("ShardFailed", False)  # what the event carries


async def test_other_failures_stay_shard_result_missing(refserver: RunningServer) -> None:
    (text,) = await _shard_texts(refserver, _spec(), shards=1)
    other = PodFailure("bench-1-abc: shard 1 could not publish its result: 403 Forbidden", index=1)
    ready = _ready(_collect([(S0, text)], expected=2, pod_failures=[other]))
    assert (ready["reason"], ready["message"].endswith(f"; {other.text}")) == ("ShardResultMissing", True)
    # an index killed for memory whose retry published is not why a result is missing
    retried = PodFailure(OOM_TEXT.replace("bench-1", "bench-0"), index=0, oom_killed=True)
    ready = _ready(_collect([(S0, text)], expected=2, pod_failures=[retried, other]))
    assert ready["reason"] == "ShardResultMissing"


async def test_status_row_and_cli_table_agree_on_errors_with_dropped_arrivals(
    refserver: RunningServer,
) -> None:
    """Dropped arrivals are errors in the status row exactly as in ``mcp-bench show`` and the
    error-rate SLO: one level summary serves all three."""
    from mcp_bench.plan import RunPlan
    from mcp_bench.report import summary_row

    plan = RunPlan.from_dict(
        {
            "url": refserver.url + "/delay?ms=100",
            "levels": {"rate": [100.0], "arrival": "constant", "max_concurrency": 2, "overload": "drop"},
            "stage": {"duration_s": 0.5},
            "slo": {"max_error_rate": 0.01},
        }
    )
    docs = await asyncio.gather(*(run_plan(plan) for _ in range(2)))
    collected = _collect([(_name(i), _publish(d, i)) for i, d in enumerate(docs)])
    assert collected.merged is not None
    (level,) = collected.merged.levels
    assert level.dropped > 20  # the server holds 2 connections for 100 ms each: most arrivals drop
    (row,) = collected.status["results"]
    cli = summary_row(collected.merged, level)
    assert row["errors"] == int(cli["errors"]) == level.failed + level.dropped
    assert row["slo"] == cli["slo"] == "Fail"  # the error-rate SLO counts the same drops
    assert row["latency"] == "e2e_from_schedule" and row["p99Ms"] == cli["p99_ms"]
    (check,) = [c for c in level.slo.checks if c.name == "max_error_rate"]
    assert check.actual == pytest.approx(row["errors"] / (level.sent + level.dropped))
    # named for what they count (issue 35, item 7): a ratio divides by what was offered, so a
    # level with most arrivals dropped does not read as a success of what completed
    assert row["completed"] == row["requests"] == level.completed
    assert row["offered"] == level.completed + level.failed + level.dropped == level.sent + level.dropped
    assert row["errorPercent"] == f"{100 * row['errors'] / row['offered']:.2f}"
    assert float(row["errorPercent"]) > 20


def test_status_is_built_through_the_model_and_uses_the_time_given() -> None:
    collected = _collect([(S0, None)], expected=1)
    assert collected.status["completedAt"] == T0
    assert all(c["lastTransitionTime"] == T0 for c in collected.status["conditions"])
    MCPBenchmarkStatus.model_validate(collected.status)  # every field is declared in the CRD


def _conditions(collected: Collected) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in collected.status["conditions"]}


async def test_the_verdict_says_what_was_merged_and_when(refserver: RunningServer) -> None:
    """The Ready message names the shards merged and the SLO's outcome; Complete and Failed say
    the run ended as a batch Job's do, at the time and generation given."""
    met = _collect(
        [(S0, t) for t in (await _shard_texts(refserver, _spec(slo={"latencyP99Ms": 5000}), 1))], 1
    )
    # (a busy host may flag the client as bound: that is said after the verdict, tested below)
    assert met.message.split("; client-bound")[0] == "1 shard(s) merged; every SLO met"
    assert met.message == _ready(met)["message"]
    conds = _conditions(met)
    assert {k: conds["Complete"][k] for k in ("status", "reason", "message", "observedGeneration")} == {
        "status": "True",
        "reason": "JobFinished",
        "message": "all shards finished",
        "observedGeneration": 3,
    }
    assert conds["Failed"]["status"] == "False" and conds["Complete"]["lastTransitionTime"] == T0
    together = _collect(list(zip((S0, S1), await _shard_texts(refserver, _spec()), strict=True)))
    overlapped = _conditions(together)["ShardsOverlapped"]
    assert (overlapped["status"], overlapped["observedGeneration"], overlapped["lastTransitionTime"]) == (
        "True",
        3,
        T0,
    )
    measured = _collect([(S0, t) for t in await _shard_texts(refserver, _spec(), 1)], 1)
    assert measured.message.split("; client-bound")[0] == "1 shard(s) merged; no SLO declared"


async def test_a_missed_slo_names_every_level_that_missed(refserver: RunningServer) -> None:
    spec = _spec(slo={"latencyP99Ms": 1}, path="/delay?ms=20")
    spec = spec.model_copy(update={"load": spec.load.model_copy(update={"concurrency": [1, 2]})})
    texts = await _shard_texts(refserver, spec, shards=1)
    missed = _collect([(S0, texts[0])], 1)
    assert missed.reason == "SloMissed"
    assert missed.message.split("; client-bound")[0] == "SLO missed at c=1, c=2"


async def test_shards_that_cannot_be_merged_are_an_error_that_says_why(refserver: RunningServer) -> None:
    one = await _shard_texts(refserver, _spec(), shards=1)
    spec = _spec()
    two_levels = spec.model_copy(update={"load": spec.load.model_copy(update={"concurrency": [1, 2]})})
    other = await _shard_texts(refserver, two_levels, shards=1)
    collected = _collect([(S0, one[0]), (S1, _publish(loads_document(other[0]), 1))])
    assert (collected.reason, collected.message) == (
        "ShardMergeFailed",
        "shards have different level counts (1 and 2)",
    )
    assert collected.status["verdict"] == "Error" and collected.status["phase"] == "Failed"
    failed = _conditions(collected)["Failed"]
    assert (failed["status"], failed["reason"], failed["observedGeneration"]) == (
        "True",
        "ShardMergeFailed",
        3,
    )


async def test_nothing_measured_says_so(refserver: RunningServer) -> None:
    texts = await _shard_texts(refserver, _spec(path="/no-such-path"), shards=1)
    assert _collect([(S0, texts[0])], expected=1).message.startswith("no request completed in any shard")


def test_every_rejected_result_is_named() -> None:
    collected = _collect([(S0, ""), (S1, "{not json")])
    assert collected.message.startswith(f"2 shard result(s) rejected: {S0} (empty result), {S1} (format:")


def test_a_missing_result_quotes_at_most_three_pod_failures() -> None:
    failures = [PodFailure(f"bench-{i}: exit 1") for i in range(5)]
    collected = merged_status(
        expected=2,
        succeeded=0,
        failed=5,
        readout=_read([], 2),
        conditions=[],
        generation=3,
        now=T0,
        pod_failures=failures,
    )
    assert collected.reason == "ShardResultMissing"
    assert collected.message == (
        "0 of 2 shards published a result (0 pods succeeded, 5 failed)"
        "; bench-0: exit 1; bench-1: exit 1; bench-2: exit 1"
    )


async def test_every_client_bound_level_is_added_to_the_verdicts_message(refserver: RunningServer) -> None:
    spec = _spec(slo={"latencyP99Ms": 5000})
    spec = spec.model_copy(update={"load": spec.load.model_copy(update={"concurrency": [1, 2]})})
    plan = plan_from_spec(spec, refserver.url, "bench")
    flagged = plan.model_copy(
        update={"client_bound": plan.client_bound.model_copy(update={"cpu_share": 1e-6})}
    )
    doc = await run_plan(flagged)
    collected = _collect([(S0, _publish(doc, 0))], expected=1)
    assert collected.message == (
        "1 shard(s) merged; every SLO met; client-bound at c=1, c=2 (results[].clientBound)"
    )


async def test_every_level_whose_shards_ran_apart_is_named(refserver: RunningServer) -> None:
    """Two shards run one after the other: neither level is a cluster-wide figure, each says why."""
    spec = _spec()
    spec = spec.model_copy(update={"load": spec.load.model_copy(update={"concurrency": [1, 2]})})
    plan = plan_from_spec(spec, refserver.url, "bench")
    texts = [_publish(await run_plan(plan), index) for index in range(2)]  # apart, by construction
    collected = _collect([(S0, texts[0]), (S1, texts[1])])
    assert (collected.reason, collected.status["verdict"]) == ("ShardsNotConcurrent", "Inconclusive")
    first, second = collected.message.split("; client-bound")[0].split("; ")  # a busy host may add that
    assert first.startswith("c=2: ") and second.startswith("c=4: ")
