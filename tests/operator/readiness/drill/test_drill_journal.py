"""The fault journal is kept in status, read by whoever may read the object: what an error quotes
(a URL's query value, a header's value) is redacted as it is written (issue 35, item 1)."""

from __future__ import annotations

from mcp_operator.readiness.drill.journal import (
    not_reverted,
    open_entries,
    planned,
    record,
    revert_condition,
    skipped,
    undo_of,
    updated,
)

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


def test_entries_are_written_through_the_model_as_before_and_keep_what_they_held() -> None:
    journal = planned(
        [], fault_id="f1", stage="s", kind="scaleDown", target="Deployment/srv", undo={"r": 3}, now="t"
    )
    assert journal == [
        {
            "id": "f1",
            "stage": "s",
            "kind": "scaleDown",
            "target": "Deployment/srv",
            "phase": "Planned",
            "undo": '{"r": 3}',
            "plannedAt": "t",
        }
    ]
    older = [{**journal[0], "addedLater": 1}, {"id": "f2", "kind": "podKill"}]  # the second: no phase
    done = updated(older, "f1", phase="RevertFailed", revert_tries=2, message="m")
    assert done[0] == {**older[0], "phase": "RevertFailed", "revertTries": 2, "message": "m"}
    assert done[1] == older[1]
    assert record(done[0]).revert_tries == 2 and undo_of(record(done[0])) == {"r": 3}
    assert open_entries(done) == [done[0]] and not_reverted(done) == done
    assert "scaleDown Deployment/srv (RevertFailed)" in revert_condition([], done, 1, "t")[0]["message"]
