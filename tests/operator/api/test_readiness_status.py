"""MCPReadiness status: each field is declared once, in ``mcp_checks.status`` (what the gate
reads); the API models derive from those, refuse what the reader ignores, and a row the operator
writes reads back as the outcome it was written from."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from mcp_checks.status import (
    CheckRow,
    ConditionRow,
    FindingRow,
    ReadinessStatusView,
    ReleaseRow,
    RetryRow,
)
from mcp_checks.verdict import CheckOutcome, Finding, Verdict
from mcp_operator.api.common import Condition
from mcp_operator.api.readiness import (
    CheckResult,
    MCPReadinessStatus,
    ReleaseRecord,
    RetryRecord,
)
from mcp_operator.api.readiness import Finding as FindingRecord
from mcp_operator.api.readinessstatus import glance
from mcp_operator.readiness.status import check_row

Model = type[BaseModel]
PAIRS: list[tuple[Model, Model]] = [
    (CheckResult, CheckRow),
    (FindingRecord, FindingRow),
    (ReleaseRecord, ReleaseRow),
    (RetryRecord, RetryRow),
    (Condition, ConditionRow),
    (MCPReadinessStatus, ReadinessStatusView),
]


@pytest.mark.parametrize(("api", "reader"), PAIRS, ids=lambda m: m.__name__)
def test_the_api_model_derives_from_the_reader_and_keeps_its_fields(api: Model, reader: Model) -> None:
    """Same fields, in the same order (the CRD's), each with the reader's alias, default and
    description; a field the API declares again only takes the API's own row type."""
    assert issubclass(api, reader)
    assert list(api.model_fields) == list(reader.model_fields)
    for name, field in reader.model_fields.items():
        ours = api.model_fields[name]
        assert (ours.alias, ours.description, ours.metadata) == (
            field.alias,
            field.description,
            field.metadata,
        )
        assert ours.get_default(call_default_factory=True) == field.get_default(call_default_factory=True)


def test_the_api_refuses_what_the_reader_ignores() -> None:
    row = {"name": "health-probe", "verdict": "Pass", "reason": "ok", "measuredAt": "t", "extra": 1}
    assert CheckRow.model_validate(row).name == "health-probe"
    with pytest.raises(ValidationError, match="extra"):
        CheckResult.model_validate(row)
    with pytest.raises(ValidationError, match="extra"):
        MCPReadinessStatus.model_validate({"checks": [row]})
    with pytest.raises(ValidationError, match="extra"):
        MCPReadinessStatus.model_validate({"conditions": [], "extra": 1})
    assert ReadinessStatusView.model_validate({"checks": [row], "extra": 1}).checks[0].reason == "ok"


def test_a_row_the_operator_writes_reads_back_as_its_outcome() -> None:
    outcome = CheckOutcome(
        "config-consistency",
        Verdict.FAIL,
        "HashMismatch",
        "1 pod on an old hash",
        observed={"pods": "3"},
        thresholds={"stale": "0"},
        measured_at="2026-05-01T12:00:00Z",
        source="Deployment/web",
        findings=[Finding("web-1", Verdict.FAIL, "OldHash", "abc", "def", "pod")],
        duration_s=0.25,
    )
    row = CheckResult.model_validate(check_row(outcome))
    assert row.outcome() == outcome
    status = MCPReadinessStatus.model_validate({"checks": [check_row(outcome)]})
    assert status.outcomes() == [outcome]
    assert ReadinessStatusView.read(status.to_wire()).outcomes() == [outcome]


def test_a_glance_reads_only_what_the_filters_need_and_tells_a_due_retry() -> None:
    retry = {"attempts": 0, "nextAt": "2026-03-01T12:00:05Z", "reason": "ProberOverloaded"}
    assert glance({"phase": "Inconclusive", "retry": retry, "checks": [{"not": "a row"}]}).retry_pending
    assert not glance({"phase": "Running", "retry": retry}).retry_pending  # a round runs: not yet
    assert not glance({"phase": "Succeeded", "retry": {**retry, "nextAt": None}}).retry_pending
    assert not glance({}).retry_pending and not glance({}).revert_failed
    fault = {"id": "f", "stage": "s", "kind": "podKill", "target": "t", "plannedAt": "2026-03-01T12:00:00Z"}
    assert glance({"faults": [{**fault, "phase": "RevertFailed"}]}).revert_failed
    assert not glance({"faults": [{**fault, "phase": "Reverted"}]}).revert_failed
