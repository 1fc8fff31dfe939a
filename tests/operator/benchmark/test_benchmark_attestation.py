"""The attestation line a shard prints and the collector reads back from the pod's log."""

from __future__ import annotations

import hashlib

import pytest

from mcp_operator.benchmark.attestation import (
    PodLog,
    attestation_line,
    attestation_problem,
    attested_digest,
    document_digest,
)

DOC = '{"shard_index": 0, "note": "caf\u00e9"}'


def test_the_digest_is_of_the_stored_bytes() -> None:
    assert document_digest(DOC) == hashlib.sha256(DOC.encode("utf-8")).hexdigest()
    assert attestation_line(DOC) == f"mcp-shard-result sha256={document_digest(DOC)}"


@pytest.mark.parametrize(
    ("log", "found"),
    [
        (f"a\n{attestation_line(DOC)}\nb\n", document_digest(DOC)),
        (f"{attestation_line('old')}\n{attestation_line(DOC)}\n", document_digest(DOC)),  # the last counts
        (f"{attestation_line(DOC)}\r\n", document_digest(DOC)),
        (f"x {attestation_line(DOC)}\n", None),  # inside another line: printed by something else
        (f"{attestation_line(DOC)}0\n", None),  # not a whole digest
        (attestation_line(DOC).upper(), None),
        ("", None),
    ],
)
def test_only_a_whole_line_attests(log: str, found: str | None) -> None:
    assert attested_digest(log) == found


def test_the_problem_says_which() -> None:
    assert attestation_problem(PodLog(attestation_line(DOC)), DOC) is None
    assert attestation_problem(PodLog(attestation_line(DOC)), DOC + " ") == (
        "the pod's log attests another document"
    )
    assert attestation_problem(PodLog("nothing\n"), DOC) == "not attested by the pod's log"
    assert attestation_problem(PodLog(None, "404: gone"), DOC) == (
        "not attested: the pod's log cannot be read (404: gone)"
    )
