"""The start barrier and live progress: which shard reports count, when the operator opens a
level, what the status says, and a shard entrypoint that really waits (fake API, reference
server); the merged status flags levels whose shards did not overlap, and Complete/Failed
behave as a batch Job's."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from tests.operator.fakekube import FakeKube

from mcp_bench.engines import run_plan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import ResultDocument, loads_document
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark import reconcile
from mcp_operator.benchmark.barrier import (
    BARRIER_FIRST_LEVEL,
    MAX_AHEAD_NS,
    RUNNING,
    ShardProgress,
    level_to_release,
    live_shards,
    parse_starts,
    progress_status,
    read_progress,
    sign,
    sound_starts,
    starts_text,
    with_run_state_env,
)
from mcp_operator.benchmark.collect import ShardReadout
from mcp_operator.benchmark.contract import (
    ENV_START_BARRIER,
    PROGRESS_LIMIT_BYTES,
    RESULT_KEY,
    START_KEY,
    shard_object_name,
    start_object_name,
)
from mcp_operator.benchmark.job import job_name, shard_job
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.progress import run_progress
from mcp_operator.benchmark.run import new_run_key, run_objects
from mcp_operator.benchmark.shard import run_shard
from mcp_operator.benchmark.shardgate import ProgressWriter, ShardGate
from mcp_operator.benchmark.status import merged_status
from mcp_operator.conditions import condition
from mcp_refserver import RunningServer

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

KEY = b"k" * 64
PODS = {"uid-0": 0, "uid-1": 1, "uid-2": 2}


def _report(index: int, state: str = "waiting", level: int = 0, **extra: Any) -> dict[str, Any]:
    body = {
        "shard": index,
        "podUid": f"uid-{index}",
        "state": state,
        "level": level,
        "levels": 3,
        "sent": 10,
        "completed": 8,
        "errors": 1,
        "inFlight": 1,
        "rateRps": 4.5,
        "etaSeconds": 30.0,
        "atMs": 1_796_000_000_000 + index,
    }
    body.update(extra)
    return body


def _read(body: dict[str, Any], index: int | None = None, key: bytes = KEY) -> ShardProgress | None:
    return read_progress(sign(body, key), KEY, body["shard"] if index is None else index, PODS)


def test_a_report_counts_only_signed_by_the_run_from_its_own_pod_and_small() -> None:
    good = _read(_report(1))
    assert good is not None and (good.index, good.state, good.sent, good.in_flight) == (1, "waiting", 10, 1)
    assert _read(_report(1), key=b"another key") is None  # not signed with the run's key
    assert _read(_report(1), index=2) is None  # shard 1's report in shard 2's object
    assert _read(_report(1, podUid="uid-2")) is None  # written by another index's pod
    assert _read(_report(1, podUid="someone")) is None  # or by no pod of the Job
    assert _read(_report(1, state="done-ish")) is None
    assert _read(_report(1, sent=-4)) is None
    padded = _report(1, pad="x" * PROGRESS_LIMIT_BYTES)
    assert _read(padded) is None  # bounded: a progress report is a handful of counters
    assert read_progress("{not json", KEY, 1, PODS) is None
    tampered = json.loads(sign(_report(1), KEY))
    tampered["completed"] = 10_000
    assert read_progress(json.dumps(tampered), KEY, 1, PODS) is None


def _all(*reports: dict[str, Any]) -> dict[int, ShardProgress]:
    out = {}
    for body in reports:
        parsed = _read(body)
        assert parsed is not None
        out[parsed.index] = parsed
    return out


def test_a_level_opens_when_every_running_shard_waits_at_it() -> None:
    waiting = _all(_report(0), _report(1), _report(2))
    assert level_to_release(waiting, {0, 1, 2}, {}) == 0
    assert level_to_release(waiting, {0, 1, 2}, {0: 123}) is None  # written already
    one_busy = _all(_report(0), _report(1, "running"), _report(2))
    assert level_to_release(one_busy, {0, 1, 2}, {}) is None
    silent = _all(_report(0), _report(1))  # shard 2 has not reported (its pod is not ready yet)
    assert level_to_release(silent, {0, 1, 2}, {}) is None
    assert level_to_release(silent, {0, 1}, {}) == 0  # shard 2's pod ended: it holds nobody
    mixed = _all(_report(0, level=1), _report(1, level=0))
    assert level_to_release(mixed, {0, 1}, {}) is None
    assert level_to_release({}, set(), {}) is None


def _pod(index: int, phase: str, job_uid: str = "job-uid") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            uid=f"uid-{index}",
            annotations={"batch.kubernetes.io/job-completion-index": str(index)},
            owner_references=[
                client.V1OwnerReference(
                    api_version="batch/v1", kind="Job", name="j", uid=job_uid, controller=True
                )
            ],
        ),
        status=client.V1PodStatus(phase=phase),
    )


def test_live_shards_are_those_not_ended() -> None:
    pods = [_pod(0, "Running"), _pod(1, "Failed"), _pod(1, "Running"), _pod(2, "Succeeded")]
    assert live_shards(4, pods, "job-uid") == {0, 1, 3}  # 1 was retried; 3 has no pod yet
    assert live_shards(2, [_pod(0, "Succeeded", "other-job")], "job-uid") == {0, 1}


def test_a_shard_oom_killed_holds_nobody_at_the_barrier() -> None:
    """Killed at its memory limit (restartPolicy Never: the pod is Failed), and not retried, the
    shard has ended: the others' level opens, and the verdict names it (ShardFailed)."""
    killed = _pod(1, "Failed")
    terminated = client.V1ContainerStateTerminated(exit_code=137, reason="OOMKilled")
    killed.status.container_statuses = [
        client.V1ContainerStatus(
            name="shard",
            image="x",
            image_id="",
            ready=False,
            restart_count=0,
            state=client.V1ContainerState(terminated=terminated),
        )
    ]
    live = live_shards(2, [_pod(0, "Running"), killed], "job-uid")
    assert live == {0}
    assert level_to_release(_all(_report(0)), live, {}) == 0


def test_progress_sums_the_shards_and_says_where_the_barrier_is() -> None:
    reports = _all(_report(0, "running", 1), _report(1, "waiting", 1), _report(2, "finished", 2))
    block = progress_status(reports, {0, 1}, {})
    assert block is not None
    assert block.level == "2/3"  # the furthest behind of the shards still going
    assert (block.sent, block.completed, block.errors, block.in_flight) == (30, 24, 3, 3)
    assert block.rate_rps == "4.50"  # only the running shard is sending
    assert block.eta_seconds == 30 and block.shards_reporting == 3
    assert block.barrier == "level 2/3: 1 of 2 running shard(s) ready, waiting for the rest"
    opened = progress_status(
        _all(_report(0, level=2), _report(1, level=2)), {0, 1}, {2: 1_796_000_000_000_000_000}
    )
    assert opened is not None and opened.barrier.startswith("level 3/3 starts at 2026-")
    done = progress_status(_all(_report(0, "finished", 2), _report(1, "finished", 2)), set(), {})
    assert done is not None and done.level == "3/3" and done.rate_rps == "n/a"
    assert progress_status({}, set(), {}) is None


def _until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_progress_writes_are_rate_limited_but_state_changes_go_at_once() -> None:
    written: list[tuple[float, str]] = []
    writer = ProgressWriter(lambda text: written.append((time.monotonic(), text)), interval_s=5.0)
    for i in range(100):  # a load loop offering a report every 5 ms
        writer.offer(f"r{i}")
        time.sleep(0.005)
    offered = time.monotonic()
    writer.offer("waiting", urgent=True)
    _until(lambda: any(text == "waiting" for _, text in written))
    urgent_at = next(t for t, text in written if text == "waiting")
    writer.close()
    routine = [text for _, text in written if text.startswith("r")]
    # the first report goes at once; every later one waits for the 5 s interval, which the urgent
    # one overtook (however slow this host, 100 offers take far less than 5 s)
    assert routine == ["r0"], routine
    assert urgent_at - offered < 2.5  # not held back by the interval
    assert written[-1][1] == "waiting"  # nothing newer was pending


def test_a_failed_progress_write_is_tried_again_without_a_newer_report() -> None:
    """A shard waiting at the barrier offers one report and nothing after it: if that write fails
    (the API server restarting), it must still arrive, or the operator never learns that it waits."""
    written: list[str] = []
    attempts: list[str] = []

    def flaky(text: str) -> None:
        attempts.append(text)
        if len(attempts) <= 2:
            raise ConnectionRefusedError("the API server is away")
        written.append(text)

    writer = ProgressWriter(flaky, interval_s=2.0)
    writer.offer("waiting", urgent=True)
    _until(lambda: written == ["waiting"])
    writer.close()
    assert attempts == ["waiting"] * 3 and writer.failures == 2 and writer.written == 1


def test_a_progress_write_refused_by_a_restarted_api_server_is_tried_again() -> None:
    """A restarted API server answers the shard's service account 403 until RBAC has synced: the
    "waiting" report must still arrive (dropped, the run stalled at the barrier for 600 s)."""
    written: list[str] = []
    attempts: list[str] = []

    def refused_then_fine(text: str) -> None:
        attempts.append(text)
        if len(attempts) == 1:
            raise ApiException(status=403, reason="Forbidden")
        written.append(text)

    writer = ProgressWriter(refused_then_fine, interval_s=2.0)
    writer.offer("waiting", urgent=True)
    _until(lambda: written == ["waiting"])
    writer.close()
    assert attempts == ["waiting"] * 2 and writer.failures == 1


def test_closing_says_whether_the_writer_stopped_or_still_retries() -> None:
    """The shard leaves without finalizing while its last report is still retried (a daemon
    thread inside an HTTPS call at interpreter shutdown aborted a shard after an API outage)."""

    def refused(text: str) -> None:
        raise ConnectionRefusedError("the API server is away")

    away = ProgressWriter(refused, interval_s=2.0)
    away.offer("finished", urgent=True)
    assert away.close(timeout_s=0.5) is False and away.failures >= 1
    fine = ProgressWriter(lambda text: None, interval_s=2.0)
    fine.offer("finished", urgent=True)
    assert fine.close(timeout_s=5.0) is True and fine.written == 1


def test_every_shard_gets_the_barrier_and_progress_env_and_one_shard_no_barrier() -> None:
    def env(shards: int, **extra: Any) -> dict[str, str]:
        spec = MCPBenchmarkSpec.model_validate(
            {
                "target": {"url": "http://h:1"},
                "load": {"concurrency": [1], "requests": 1},
                "shards": shards,
                **extra,
            }
        )
        job = with_run_state_env(
            shard_job(
                spec=spec,
                name="b",
                job=job_name("b", spec),
                uid="u",
                command=("x",),
                default_image="i",
            ),
            spec,
        )
        return {
            e["name"]: e.get("value", "") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
        }

    assert env(3)[ENV_START_BARRIER] == "1" and env(3)["MCP_BARRIER_TIMEOUT_S"] == "600"
    assert env(3)["MCP_PROGRESS_INTERVAL_S"] == "2"
    assert ENV_START_BARRIER not in env(1)
    assert ENV_START_BARRIER not in env(3, startBarrier={"enabled": False})
    assert env(200)["MCP_PROGRESS_INTERVAL_S"] == "10"  # about 20 writes a second in all
    # the first level only (a drill stage's windows): on for one shard too, for its start time
    assert env(3, startBarrier={"everyLevel": False})[ENV_START_BARRIER] == BARRIER_FIRST_LEVEL
    assert env(1, startBarrier={"everyLevel": False})[ENV_START_BARRIER] == BARRIER_FIRST_LEVEL
    assert ENV_START_BARRIER not in env(1, startBarrier={"everyLevel": False, "enabled": False})


def test_an_unset_barrier_keeps_the_job_name_of_specs_written_before_it() -> None:
    base = {"target": {"url": "http://h:1"}, "load": {"concurrency": [1], "requests": 1}, "shards": 2}
    plain = MCPBenchmarkSpec.model_validate(base)
    tuned = MCPBenchmarkSpec.model_validate({**base, "startBarrier": {"minOverlap": 0.5}})
    assert job_name("b", plain) != job_name("b", tuned)
    assert job_name("b", plain) == job_name("b", MCPBenchmarkSpec.model_validate(dict(base)))
    # everyLevel at its default keeps a tuned barrier's Job name as it was before the field
    spelled = MCPBenchmarkSpec.model_validate(
        {**base, "startBarrier": {"minOverlap": 0.5, "everyLevel": True}}
    )
    assert job_name("b", spelled) == job_name("b", tuned)
    first = MCPBenchmarkSpec.model_validate(
        {**base, "startBarrier": {"minOverlap": 0.5, "everyLevel": False}}
    )
    assert job_name("b", first) != job_name("b", tuned)


async def test_with_the_first_level_only_a_shard_waits_once_then_runs_back_to_back() -> None:
    """A drill stage's windows are levels of one load: only the first waits for the operator's
    start; the later ones follow at once, with no barrier's lead between them."""
    writer = ProgressWriter(lambda text: None, interval_s=2.0)
    reads: list[float] = []
    start_ns = time.time_ns() + 200_000_000

    def read_starts() -> dict[int, int]:
        reads.append(time.monotonic())
        return {0: start_ns}

    gate = ShardGate(
        index=0,
        pod_uid="p",
        key=b"k" * 32,
        barrier=True,
        timeout_s=5.0,
        writer=writer,
        read_starts=read_starts,
        first_level_only=True,
    )
    spec = MCPBenchmarkSpec.model_validate(
        {"target": {"url": "http://h:1"}, "load": {"rate": [5.0, 5.0, 5.0], "durationSeconds": 1}}
    )
    plan = plan_from_spec(spec, "http://h:1", "b")
    await gate.level_ready(plan, LevelMeta(index=0, mode="open", requested_rate=5.0))
    assert gate.waited == {0: start_ns} and time.time_ns() >= start_ns
    began = time.monotonic()
    for index in (1, 2):
        await gate.level_ready(plan, LevelMeta(index=index, mode="open", requested_rate=5.0))
    assert time.monotonic() - began < 0.1 and len(reads) == 1  # never asked again
    assert gate.state == RUNNING and list(gate.waited) == [0]
    writer.close()


def test_shards_take_a_start_only_signed_with_the_runs_key() -> None:
    """A user with ConfigMap rights wrote ``<job>-start`` an hour ahead and both shards idled:
    an unsigned start, or one signed with another key, is no start at all."""
    key, now = b"k" * 32, time.time_ns()
    signed = starts_text({0: now + 2_000_000_000}, key)
    assert parse_starts(signed, key) == {0: now + 2_000_000_000}
    assert parse_starts(json.dumps({"0": now + 3600 * 10**9}), key) == {}  # the old, unsigned form
    assert parse_starts(starts_text({0: now}, b"x" * 32), key) == {}  # another key
    forged = json.loads(signed)
    forged["levels"]["0"] = now + 3600 * 10**9
    assert parse_starts(json.dumps(forged), key) == {}  # changed after signing


async def test_a_signed_start_too_far_ahead_is_refused_and_reported() -> None:
    """Even signed, a start an hour ahead is further than the barrier ever sets one: the shard
    does not sleep on it, says so in its result, and gives up waiting at its own timeout."""
    writer = ProgressWriter(lambda text: None, interval_s=2.0)
    gate = ShardGate(
        index=0,
        pod_uid="p",
        key=b"k" * 32,
        barrier=True,
        timeout_s=1.0,
        writer=writer,
        read_starts=lambda: {0: time.time_ns() + 3600 * 10**9},
    )
    started = time.monotonic()
    assert await gate._wait_for_start(0) is None
    assert time.monotonic() - started < 3.0  # its own timeout, not an hour
    assert list(gate.refused) == [0] and "3600 s ahead" in gate.refused[0]
    writer.close()


@pytest.mark.parametrize("start_object", ["as made", "deleted", "signed an hour ahead"])
async def test_a_shard_waits_for_the_start_the_operator_writes(
    kube_fake: FakeKube,
    refserver: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    start_object: str,
) -> None:
    """Shard 1 of 2 through its real entrypoint; shard 0's pod has ended, so it holds nobody;
    the operator's tick (``run_progress``) opens the level once shard 1 waits. A start object
    someone deleted is made again, and a validly signed start an hour ahead (a Secret reader's)
    replaced, each with an event: the shard runs within a few ticks, never alone after the
    barrier's timeout."""
    ns, name, uid = "perf", "barrier-bench", "6e1d8f6f-3c2b-4d4f-8a21-9b7c5e3f2d18"
    spec = MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": refserver.url, "path": "/delay?ms=1"},
            "load": {"concurrency": [1], "durationSeconds": 0.5, "requestTimeoutSeconds": 5},
            "shards": 2,
        }
    )
    job = job_name(name, spec)
    plan = plan_from_spec(spec, refserver.url, name)
    manifest = with_run_state_env(
        shard_job(
            spec=spec,
            name=name,
            job=job_name(name, spec),
            uid=uid,
            command=("shard",),
            default_image="i",
        ),
        spec,
    )
    key = new_run_key()
    assert await reconcile.create_run(
        ns, run_objects(spec=spec, benchmark=name, uid=uid, job=job, key=key, plan=plan), manifest
    )
    start = ("ConfigMap", ns, start_object_name(job))
    if start_object == "deleted":
        del kube_fake.objects[start]
    elif start_object == "signed an hour ahead":
        kube_fake.objects[start]["data"] = {
            START_KEY: starts_text({0: time.time_ns() + 3600 * 10**9}, key.encode())
        }
    events: list[tuple[bool, str, str]] = []
    pods = kube_fake.start_indexed_job(ns, job)
    kube_fake.set_status("Pod", ns, pods[0]["metadata"]["name"], {"phase": "Succeeded"})
    kube_fake.set_status("Pod", ns, pods[1]["metadata"]["name"], {"phase": "Running"})
    for var, value in kube_fake.container_env(pods[1]).items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("MCP_TERMINATION_MESSAGE_PATH", str(tmp_path / "termination-log"))
    stored = kube_fake.get("Job", ns, job)
    assert stored is not None
    state = reconcile.JobState(False, 0, 0, stored["metadata"]["uid"], 2)

    def tick() -> Any:
        return run_progress(ns, job, state, kube_pods, spec, (name, uid), lambda *e: events.append(e))

    shard = asyncio.create_task(asyncio.to_thread(run_shard))
    seen: list[dict[str, Any]] = []
    started = time.monotonic()
    while not shard.done():
        kube_pods = await reconcile.run_pods(ns, job)
        block = await tick()
        if block is not None:
            seen.append(block)
        await asyncio.sleep(0.2)
    assert await shard == 0
    assert time.monotonic() - started < 60  # not the barrier's timeout (600 s)
    expected = {
        "as made": [],
        "deleted": ["StartObjectRecreated"],
        "signed an hour ahead": ["BarrierStartReplaced"],
    }
    assert [reason for _, reason, _ in events] == expected[start_object], events
    start_map = kube_fake.get("ConfigMap", ns, start_object_name(job))
    assert start_map is not None
    starts = parse_starts(start_map["data"][START_KEY], key.encode())  # signed by the operator
    assert list(starts) == [0]
    result = kube_fake.get("ConfigMap", ns, shard_object_name(job, 1))
    assert result is not None
    (level,) = loads_document(result["data"][RESULT_KEY], key.encode()).levels
    assert level.start_at_unix_ns == starts[0]  # the level records the time it waited for
    assert level.first_start_unix_ns is not None and 0 <= level.first_start_unix_ns - starts[0] < 100_000_000
    assert any(b["barrier"].startswith("level 1/1: 1 of 1") or "starts at" in b["barrier"] for b in seen)
    kube_pods = await reconcile.run_pods(ns, job)
    final = await tick()
    assert final is not None and final["level"] == "1/1" and final["completed"] == level.completed
    assert final["etaSeconds"] == 0 and final["inFlight"] == 0


@pytest.fixture
async def docs(refserver: RunningServer) -> list[ResultDocument]:
    spec = MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://placeholder", "path": "/delay?ms=1"},
            "load": {"concurrency": [2], "durationSeconds": 0.4},
        }
    )
    plan = plan_from_spec(spec, refserver.url, "bench")
    return [await run_plan(plan) for _ in range(2)]  # one after the other: their windows never meet


def _merged(docs: list[ResultDocument], min_overlap: float) -> Any:
    for index, doc in enumerate(docs):
        doc.shard_index = index
    return merged_status(
        expected=2,
        succeeded=2,
        failed=0,
        readout=ShardReadout(documents=docs),
        conditions=[],
        generation=1,
        now="2026-01-01T00:00:00Z",
        min_overlap=min_overlap,
    )


def test_shards_that_did_not_run_together_are_no_cluster_wide_figure(docs: list[ResultDocument]) -> None:
    collected = _merged(docs, 0.9)
    status = collected.status
    (row,) = status["results"]
    assert row["clusterWide"] is False and float(row["overlapPercent"]) < 10
    assert status["verdict"] == "Inconclusive" and status["phase"] == "Succeeded"
    assert status["p99Ms"] == "n/a" and status["throughputRps"] == "n/a"  # printer columns: none
    conds = status["conditions"]
    overlapped = condition(conds, "ShardsOverlapped")
    assert overlapped is not None and overlapped["status"] == "False"
    assert (
        overlapped["reason"] == "ShardWindowsApart" and "not a cluster-wide figure" in overlapped["message"]
    )
    ready = condition(conds, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "ShardsNotConcurrent")
    # the run did finish: Complete, not Failed
    assert condition(conds, "Complete")["status"] == "True"  # type: ignore[index]
    assert condition(conds, "Failed")["status"] == "False"  # type: ignore[index]
    lenient = _merged(docs, 0.0).status
    assert lenient["verdict"] == "Pass" and lenient["results"][0]["clusterWide"] is True
    assert condition(lenient["conditions"], "ShardsOverlapped")["reason"] == "ShardsRanTogether"  # type: ignore[index]


def test_a_run_without_results_is_failed_not_complete() -> None:
    status = merged_status(
        expected=2,
        succeeded=0,
        failed=2,
        readout=ShardReadout(),
        conditions=[],
        generation=1,
        now="2026-01-01T00:00:00Z",
    ).status
    failed, complete = condition(status["conditions"], "Failed"), condition(status["conditions"], "Complete")
    assert failed is not None and (failed["status"], failed["reason"]) == ("True", "ShardResultMissing")
    assert complete is not None and complete["status"] == "False"
    assert condition(status["conditions"], "ShardsOverlapped") is None  # nothing to judge


def test_the_operator_stands_by_the_starts_a_shard_would_take() -> None:
    now = 1_000 * 10**9
    starts = {0: now - 5 * 10**9, 1: now + MAX_AHEAD_NS, 2: now + MAX_AHEAD_NS + 1}
    kept, dropped = sound_starts(starts, now)
    assert kept == {0: now - 5 * 10**9, 1: now + MAX_AHEAD_NS}  # a past level already ran
    assert list(dropped) == [2] and "30 s ahead" in dropped[2]
