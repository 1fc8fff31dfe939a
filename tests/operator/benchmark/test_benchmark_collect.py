"""Forged, copied and stray shard results never merge: one result per expected index, from the
object the operator named, owned by the CR, signed with the run's key, written by that index's
pod of that run's Job. Documents come from real runs against the reference server."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import google_crc32c
import pytest
from kubernetes import client
from tests.operator.attested import honest_logs

from mcp_bench.engines import run_plan
from mcp_bench.results.document import ResultDocument, dumps_document, loads_document
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark.attestation import PodLog, attestation_line
from mcp_operator.benchmark.collect import (
    PublishedObject,
    RunIdentity,
    ShardReadout,
    pod_indices,
    read_shards,
)
from mcp_operator.benchmark.contract import shard_index_of, shard_object_name
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.status import Collected, merged_status
from mcp_operator.conditions import condition
from mcp_refserver import RunningServer

UID = "0f9c2a1e-5b7d-4c1e-9e51-3d8c6a7b2f10"
JOB = "bench-1a2b3c4d"
KEY = b"run-key-" * 8
PODS = {"pod-uid-0": 0, "pod-uid-1": 1}
REQUESTS = 10


def _origin(index: int, *, uid: str = UID, job: str = JOB, pod_uid: str | None = None) -> dict[str, str]:
    return {"runUid": uid, "job": job, "pod": f"{job}-{index}-abcde", "podUid": pod_uid or f"pod-uid-{index}"}


def _signed(doc: ResultDocument, index: int, key: bytes | None = KEY, **origin: Any) -> str:
    copy = doc.model_copy(deep=True)
    copy.shard_index = index
    copy.origin = _origin(index, **origin)
    return dumps_document(copy, key)


@pytest.fixture
async def docs(refserver: RunningServer) -> list[ResultDocument]:
    spec = MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://placeholder", "path": "/delay?ms=1"},
            "load": {"concurrency": [2], "requests": REQUESTS},
        }
    )
    plan = plan_from_spec(spec, refserver.url, "bench")
    return list(await asyncio.gather(*(run_plan(plan) for _ in range(2))))


def _objects(
    *pairs: tuple[str, str | None], owners: frozenset[str] = frozenset({UID})
) -> list[PublishedObject]:
    return [PublishedObject(name, owners, text) for name, text in pairs]


def _run(key: bytes | None = KEY, shards: int = 2, logs: dict[str, PodLog] | None = None) -> RunIdentity:
    """The run; its pods' logs as given, else empty (the caller's ``_read`` fills them in)."""
    return RunIdentity(uid=UID, job=JOB, shards=shards, key=key, pods=dict(PODS), logs=logs or {})


def _read(run: RunIdentity, objects: list[PublishedObject]) -> ShardReadout:
    """``read_shards`` with the pods' logs honest (attesting what their objects hold) unless the
    run brings logs of its own."""
    if not run.logs:
        run = replace(run, logs=honest_logs(run.pods, JOB, objects))
    return read_shards(run, objects)


def _status(objects: list[PublishedObject], run: RunIdentity | None = None) -> Collected:
    readout = _read(run or _run(), objects)
    return merged_status(
        expected=2,
        succeeded=2,
        failed=0,
        readout=readout,
        conditions=[],
        generation=1,
        now="2026-01-01T00:00:00Z",
        min_overlap=0.0,  # trust only here: these short runs' overlap is test_barrier's subject
    )


def _good(docs: list[ResultDocument]) -> list[tuple[str, str | None]]:
    return [(shard_object_name(JOB, i), _signed(docs[i], i)) for i in range(2)]


def test_the_run_s_own_results_merge(docs: list[ResultDocument]) -> None:
    collected = _status(_objects(*_good(docs)))
    assert collected.status["verdict"] == "Pass"
    assert collected.status["shards"]["reported"] == 2 and collected.status["shards"]["rejected"] == 0
    assert collected.status["results"][0]["requests"] == 2 * REQUESTS


def test_an_extra_result_with_a_recomputed_checksum_is_rejected_not_merged(
    docs: list[ResultDocument],
) -> None:
    # shard 0's document relabelled as shard 7, checksum recomputed: a CRC alone would accept it
    data = json.loads(_good(docs)[0][1] or "")
    data["shard_index"] = 7
    del data["crc32c"]
    forged = dumps_document(ResultDocument.model_validate(data))
    loads_document(forged)  # the checksum is right
    extra = shard_object_name(JOB, 7)
    collected = _status(_objects(*_good(docs), (extra, forged)))
    assert collected.status["shards"]["reported"] == 2 and collected.status["shards"]["rejected"] == 1
    assert collected.status["results"][0]["requests"] == 2 * REQUESTS  # not 3 shards' worth
    ready = condition(collected.status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "ShardResultRejected" and extra in ready["message"]
    assert "unexpected result object" in ready["message"]
    assert collected.status["verdict"] != "Pass"


def test_even_a_correctly_signed_extra_result_is_rejected(docs: list[ResultDocument]) -> None:
    extra = shard_object_name(JOB, 2)
    readout = _read(_run(), _objects(*_good(docs), (extra, _signed(docs[0], 2, pod_uid="pod-uid-0"))))
    assert len(readout.documents) == 2 and readout.rejected[extra].startswith("unexpected result object")


def test_shard_0_copied_over_shard_1_is_rejected(docs: list[ResultDocument]) -> None:
    good = _good(docs)
    copied = [good[0], (good[1][0], good[0][1])]
    readout = _read(_run(), _objects(*copied))
    assert [d.shard_index for d in readout.documents] == [0]  # shard 0 counted once, not twice
    assert readout.rejected == {shard_object_name(JOB, 1): "holds shard 0's result, not shard 1's"}
    collected = _status(_objects(*copied))
    assert collected.status["verdict"] != "Pass"
    assert collected.status["results"][0]["requests"] == REQUESTS


@pytest.mark.parametrize(
    ("tamper", "why"),
    [
        (lambda d: _signed(d, 1, key=None), "signature: result document is not signed"),
        (lambda d: _signed(d, 1, key=b"another key"), "signature: hmac_sha256 does not match"),
        (lambda d: _signed(d, 1, uid="another-run"), "written for another run"),
        (lambda d: _signed(d, 1, job="bench-other"), "written for another run"),
        (
            lambda d: _signed(d, 1, pod_uid="pod-uid-0"),
            "not written by a pod of Job bench-1a2b3c4d with index 1",
        ),
        (lambda d: _signed(d, 1, pod_uid="someone-else"), "not written by a pod of Job"),
        (lambda d: "{not json", "format:"),
        (lambda d: "", "empty result"),
    ],
)
def test_a_result_that_is_not_the_run_s_own_is_rejected(
    docs: list[ResultDocument], tamper: Any, why: str
) -> None:
    name = shard_object_name(JOB, 1)
    readout = _read(_run(), _objects(_good(docs)[0], (name, tamper(docs[1]))))
    assert [d.shard_index for d in readout.documents] == [0]
    assert readout.rejected[name].startswith(why), readout.rejected


def _with_checksum(data: dict[str, Any]) -> str:
    """``data`` with its CRC-32C recomputed, as anyone can (the signature is left as it was)."""
    body = {k: v for k, v in data.items() if k != "crc32c"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data["crc32c"] = f"{google_crc32c.value(canonical.encode()):08x}"
    return json.dumps(data)


def test_a_signed_index_edited_afterwards_breaks_the_signature(docs: list[ResultDocument]) -> None:
    data = json.loads(_signed(docs[0], 0))
    data["shard_index"] = 1
    data["origin"]["podUid"] = "pod-uid-1"
    edited = _with_checksum(data)
    loads_document(edited)  # the checksum is right
    name = shard_object_name(JOB, 1)
    readout = _read(_run(), _objects((name, edited)))
    assert readout.documents == [] and readout.rejected[name].startswith(
        "signature: hmac_sha256 does not match"
    )


def test_not_owned_by_the_benchmark_is_rejected(docs: list[ResultDocument]) -> None:
    readout = _read(_run(), _objects(*_good(docs), owners=frozenset({"someone-else"})))
    assert readout.documents == [] and set(readout.rejected.values()) == {"not owned by this MCPBenchmark"}


def test_without_the_run_s_key_nothing_is_accepted(docs: list[ResultDocument]) -> None:
    readout = _read(_run(key=None), _objects(*_good(docs)))
    assert readout.documents == [] and len(readout.rejected) == 2
    assert all("key Secret is missing" in why for why in readout.rejected.values())


def test_an_object_a_shard_has_not_filled_in_is_missing_not_rejected(docs: list[ResultDocument]) -> None:
    good = _good(docs)
    collected = _status(_objects(good[0], (good[1][0], None)))
    ready = condition(collected.status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "ShardResultMissing"
    assert collected.status["shards"]["rejected"] == 0 and collected.status["shards"]["reported"] == 1


def test_the_report_and_documents_show_the_url_redacted(docs: list[ResultDocument]) -> None:
    leaked = docs[0].model_copy(deep=True)
    leaked.plan = leaked.plan.model_copy(update={"url": "http://u:tok@h/x?token=tok"})
    readout = _read(_run(shards=1), _objects((shard_object_name(JOB, 0), _signed(leaked, 0))))
    (doc,) = readout.documents
    assert doc.plan.url == "http://REDACTED@h/x?token=REDACTED"


@pytest.mark.parametrize(
    ("name", "index"),
    [
        (f"{JOB}-shard-0", 0),
        (f"{JOB}-shard-255", 255),
        (f"{JOB}-shard-01", None),
        (f"{JOB}-shard-", None),
        (f"{JOB}-shard-x", None),
        (f"{JOB}-shard--1", None),
        (f"{JOB}-shard-\u0661", None),  # a non-ASCII digit
        (f"{JOB}x-shard-1", None),
        ("other-shard-1", None),
    ],
)
def test_index_from_the_object_name(name: str, index: int | None) -> None:
    assert shard_index_of(JOB, name) == index


def _pod(uid: str, index: str | None, owner_uid: str, controller: bool = True) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            uid=uid,
            annotations={"batch.kubernetes.io/job-completion-index": index} if index is not None else None,
            owner_references=[
                client.V1OwnerReference(
                    api_version="batch/v1", kind="Job", name=JOB, uid=owner_uid, controller=controller
                )
            ],
        )
    )


def test_only_pods_the_job_controls_count() -> None:
    pods = [
        _pod("a", "0", "job-uid"),
        _pod("b", "1", "job-uid"),
        _pod("c", "1", "other-job"),  # labelled like the Job's pods, owned by another
        _pod("d", "2", "job-uid", controller=False),
        _pod("e", None, "job-uid"),
    ]
    assert pod_indices(pods, "job-uid") == {"a": 0, "b": 1}


# --- the writer pod's log attests the document (a Secret reader can sign, not write the log) ---


def _times_ten(text: str) -> str:
    """What a Secret reader can make of a genuine result: completed x 10, re-signed with the key."""
    doc = loads_document(text, KEY)
    for level in doc.levels:
        level.completed *= 10
    return dumps_document(doc, KEY)


def _attesting(*texts: str | None) -> dict[str, PodLog]:
    """Pod ``pod-uid-i``'s log attesting ``texts[i]`` (None: the pod printed no attestation)."""
    return {
        f"pod-uid-{i}": PodLog("warming up\n" + (f"{attestation_line(t)}\n" if t else "") + "done\n")
        for i, t in enumerate(texts)
    }


def test_a_result_the_writer_pod_s_log_attests_is_accepted(docs: list[ResultDocument]) -> None:
    good = _good(docs)
    readout = read_shards(_run(logs=_attesting(good[0][1], good[1][1])), _objects(*good))
    assert [d.shard_index for d in readout.documents] == [0, 1] and readout.rejected == {}


def test_a_re_signed_result_the_log_does_not_attest_is_rejected(docs: list[ResultDocument]) -> None:
    good = _good(docs)
    forged = _times_ten(good[1][1] or "")
    loads_document(forged, KEY)  # a valid signature: the HMAC alone would accept it
    run = _run(logs=_attesting(good[0][1], good[1][1]))
    readout = read_shards(run, _objects(good[0], (good[1][0], forged)))
    assert [d.shard_index for d in readout.documents] == [0]
    assert readout.rejected == {shard_object_name(JOB, 1): "the pod's log attests another document"}
    collected = _status(_objects(good[0], (good[1][0], forged)), run)
    assert collected.status["verdict"] != "Pass" and collected.status["shards"]["rejected"] == 1
    assert collected.status["results"][0]["requests"] == REQUESTS  # the forged 10x never counted


def test_the_last_attestation_in_the_log_counts(docs: list[ResultDocument]) -> None:
    good = _good(docs)
    forged = _times_ten(good[0][1] or "")
    log = f"{attestation_line(forged)}\n{attestation_line(good[0][1] or '')}\n"
    readout = read_shards(_run(shards=1, logs={"pod-uid-0": PodLog(log)}), _objects((good[0][0], forged)))
    assert readout.rejected == {good[0][0]: "the pod's log attests another document"}


@pytest.mark.parametrize(
    ("log", "why"),
    [
        (PodLog("shard 0: result published\n"), "not attested by the pod's log"),
        (PodLog(""), "not attested by the pod's log"),
        (
            PodLog(None, "403 Forbidden: the operator may not get pods/log here: forbidden"),
            "not attested: the pod's log cannot be read (403 Forbidden: the operator may not get pods/log",
        ),
        (
            PodLog(None, "404: the pod or its container's log is gone: not found"),
            "not attested: the pod's log cannot be read (404",
        ),
        (
            PodLog(None, "500: the kubelet's answer did not come through: dial tcp: connection refused"),
            "not attested: the pod's log cannot be read (500: the kubelet's answer did not come through",
        ),
        (None, "not attested: the pod's log cannot be read (it was not read)"),
    ],
)
def test_a_result_without_its_pod_s_attestation_is_rejected(
    docs: list[ResultDocument], log: PodLog | None, why: str
) -> None:
    good = _good(docs)
    logs = _attesting(good[0][1])
    if log is not None:
        logs["pod-uid-1"] = log
    readout = read_shards(_run(logs=logs), _objects(*good))
    assert [d.shard_index for d in readout.documents] == [0]
    assert readout.rejected[shard_object_name(JOB, 1)].startswith(why), readout.rejected
