"""Signed result documents: the HMAC covers everything but the checksum (the origin included), so
a document edited and re-checksummed, or signed with another key, is told apart from the real one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.results.document import (
    ChecksumMismatchError,
    EngineFingerprint,
    ResultDocument,
    SignatureMismatchError,
    dumps_document,
    loads_document,
)

KEY = b"k" * 32


def _doc() -> ResultDocument:
    plan = RunPlan.from_dict({"url": "http://svc", "levels": {"concurrency": [1]}, "stage": {"requests": 1}})
    now = datetime(2026, 1, 1, tzinfo=UTC)
    doc = ResultDocument(started_at=now, ended_at=now, engine=EngineFingerprint(), plan=plan, levels=[])
    doc.origin = {"runUid": "u", "job": "j", "podUid": "p"}
    return doc


def test_a_signed_document_verifies_with_its_key_and_round_trips() -> None:
    text = dumps_document(_doc(), KEY)
    data = json.loads(text)
    assert len(data["hmac_sha256"]) == 64 and data["origin"]["podUid"] == "p"
    doc = loads_document(text, KEY)
    assert doc.origin == {"runUid": "u", "job": "j", "podUid": "p"}
    assert dumps_document(doc, KEY) == text  # stable canonical bytes
    assert loads_document(text).hmac_sha256 == data["hmac_sha256"]  # readable without the key


def test_wrong_key_or_no_signature_is_rejected() -> None:
    with pytest.raises(SignatureMismatchError, match="does not match"):
        loads_document(dumps_document(_doc(), KEY), b"other")
    with pytest.raises(SignatureMismatchError, match="not signed"):
        loads_document(dumps_document(_doc()), KEY)


def test_an_edit_with_a_recomputed_checksum_breaks_the_signature() -> None:
    import google_crc32c

    data = json.loads(dumps_document(_doc(), KEY))
    data["origin"]["podUid"] = "someone-else"
    body = {k: v for k, v in data.items() if k != "crc32c"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data["crc32c"] = f"{google_crc32c.value(canonical.encode()):08x}"
    loads_document(json.dumps(data))  # the checksum alone is satisfied
    with pytest.raises(SignatureMismatchError):
        loads_document(json.dumps(data), KEY)


def test_the_checksum_still_comes_first() -> None:
    text = dumps_document(_doc(), KEY).replace('"job":"j"', '"job":"x"')
    with pytest.raises(ChecksumMismatchError):
        loads_document(text, KEY)


def test_an_unsigned_document_without_origin_reads_as_before() -> None:
    data = json.loads(dumps_document(_doc().model_copy(update={"origin": {}})))
    assert "origin" not in data and "hmac_sha256" not in data
