"""The fault journal is kept in status, read by whoever may read the object: what an error quotes
(a URL's query value, a header's value) is redacted as it is written (issue 35, item 1)."""

from __future__ import annotations

from mcp_operator.readiness.drill.journal import skipped, updated

TOKEN = "canary-J0URNAL-7c2e"


def test_a_skipped_faults_message_is_redacted() -> None:
    (entry,) = skipped(
        [],
        fault_id="f1",
        stage="s",
        kind="podKill",
        message=f"preflight: http://svc:8000/v1?model={TOKEN} did not answer",
        now="t",
    )
    assert TOKEN not in entry["message"] and "http://svc:8000/v1?model=REDACTED" in entry["message"]


def test_an_updated_entrys_message_is_redacted_and_other_entries_kept() -> None:
    journal = skipped([], fault_id="f1", stage="s", kind="podKill", message="m", now="t")
    journal = skipped(journal, fault_id="f2", stage="s", kind="podKill", message="n", now="t")
    failed = updated(
        journal, "f2", phase="RevertFailed", message=f"ApiException: Authorization: Bearer {TOKEN}"
    )
    assert failed[0] == journal[0]
    assert failed[1]["phase"] == "RevertFailed" and TOKEN not in failed[1]["message"]
    assert failed[1]["message"] == "ApiException: Authorization: Bearer REDACTED"
