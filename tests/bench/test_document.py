from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import (
    ChecksumMismatchError,
    DocumentFormatError,
    EngineFingerprint,
    ResultDocument,
    dumps_document,
    loads_document,
)

PLAN = RunPlan.from_dict(
    {"url": "http://127.0.0.1:1/", "levels": {"concurrency": [2]}, "stage": {"duration_s": 1}}
)


def _doc() -> ResultDocument:
    acc = LevelAccumulator(PLAN.slo, open_loop=False, late_after_ns=1_000_000)
    for i in range(50):
        acc.add(RequestRecord(sent_ns=i * 1_000_000, end_ns=i * 1_000_000 + 5_000_000 + i * 1000))
    acc.add(RequestRecord(sent_ns=0, end_ns=10, error=ErrorKind.CONNECT))
    level = acc.to_result(LevelMeta(index=0, mode="closed", concurrency=2), stop_reason="duration")
    now = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    return ResultDocument(
        started_at=now, ended_at=now, engine=EngineFingerprint(server_name="s"), plan=PLAN, levels=[level]
    )


def test_roundtrip_and_canonical_form() -> None:
    doc = _doc()
    text = dumps_document(doc)
    assert text == dumps_document(loads_document(text))  # stable canonical bytes
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert len(data["crc32c"]) == 8
    assert data["started_at"].startswith("2026-01-02T03:04:05.678901")
    back = loads_document(text)
    assert back.levels[0].errors == {ErrorKind.CONNECT: 1}
    assert back.levels[0].latency["e2e"].count == 50
    assert back.plan == PLAN


def test_tampered_document_is_rejected() -> None:
    text = dumps_document(_doc())
    tampered = text.replace('"completed":50', '"completed":51')
    assert tampered != text
    with pytest.raises(ChecksumMismatchError, match="crc32c mismatch"):
        loads_document(tampered)
    data = json.loads(text)
    del data["crc32c"]
    with pytest.raises(ChecksumMismatchError, match="no crc32c"):
        loads_document(json.dumps(data))
    assert issubclass(ChecksumMismatchError, ValueError)


def test_reformatted_but_equal_json_still_verifies() -> None:
    text = dumps_document(_doc())
    pretty = json.dumps(json.loads(text), indent=2)
    assert loads_document(pretty).levels[0].completed == 50


def test_not_a_document() -> None:
    with pytest.raises(DocumentFormatError):
        loads_document("{not json")
    with pytest.raises(DocumentFormatError):
        loads_document("[1]")
