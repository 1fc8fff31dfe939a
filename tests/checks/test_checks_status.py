"""The typed reader of MCPReadiness status (``mcp_checks.status``): kubectl-style JSON in, models
out, fields a newer operator adds ignored, and a status that does not read waited past, never
taken for a verdict."""

from __future__ import annotations

from typing import Any

from mcp_checks.gate.judge import Wanted, judge, settled, timed_out
from mcp_checks.status import CheckRow, ReadinessObject, ReadinessStatusView
from mcp_checks.verdict import Verdict


def _gate(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": "g", "generation": 2, "resourceVersion": "7", "uid": "u"},
        "spec": {"target": {"url": "http://t"}, "recheckIntervalSeconds": 60},
        "status": {
            "observedGeneration": 2,
            "phase": "Failed",
            "verdict": "Fail",
            "release": {
                "revision": "r2",
                "trigger": "Spec",
                "generation": 2,
                "startedAt": "2026-05-01T12:00:00.000Z",
                "completedAt": "2026-05-01T12:00:02.500Z",
            },
            "checks": [
                {
                    "name": "xds-sync",
                    "verdict": "Fail",
                    "reason": "ProxyNacked",
                    "message": "1 of 2 proxies rejected the config",
                    "observed": {"synced": "1"},
                    "measuredAt": "2026-05-01T12:00:02Z",
                    "durationMs": 1500,
                    "findings": [
                        {"subject": "web-1/LDS", "verdict": "Fail", "reason": "Nack", "observed": "v2"}
                    ],
                    "findingsTotal": 1,
                }
            ],
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "True",
                    "reason": "Valid",
                    "lastTransitionTime": "2026-05-01T12:00:00Z",
                },
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "ProxyNacked",
                    "message": "xds-sync failed",
                    "lastTransitionTime": "2026-05-01T12:00:02Z",
                },
            ],
            **status,
        },
    }


def test_status_reads_into_models_and_rows_into_outcomes() -> None:
    gate = ReadinessObject.read(_gate())
    assert (gate.metadata.generation, gate.metadata.resource_version) == (2, "7")
    assert gate.spec.recheck_interval_seconds == 60 and gate.spec.suspend is None
    status = gate.status
    ready = status.condition("Ready")
    assert ready is not None and (ready.reason, ready.message) == ("ProxyNacked", "xds-sync failed")
    assert status.condition("Progressing") is None
    assert status.release is not None and status.release.completed_at == "2026-05-01T12:00:02.500Z"
    [outcome] = status.outcomes()
    assert (outcome.name, outcome.outcome, outcome.reason) == ("xds-sync", Verdict.FAIL, "ProxyNacked")
    assert outcome.duration_s == 1.5 and outcome.observed == {"synced": "1"}
    [finding] = outcome.findings
    assert (finding.subject, finding.outcome, finding.threshold) == ("web-1/LDS", Verdict.FAIL, "")


def test_fields_a_newer_operator_writes_are_ignored() -> None:
    raw = _gate(newSummary={"a": 1})
    raw["status"]["checks"][0]["newFigure"] = "x"
    raw["status"]["release"]["newRecord"] = True
    raw["status"]["conditions"][1]["newField"] = 1
    gate = ReadinessObject.read(raw)
    assert gate.unreadable is None
    assert [row.name for row in gate.status.checks] == ["xds-sync"]


def test_a_status_that_does_not_read_is_waited_past_and_said_at_the_timeout() -> None:
    raw = _gate()
    raw["status"]["checks"][0]["verdict"] = "Maybe"
    gate = ReadinessObject.read(raw)
    assert gate.unreadable is not None and "checks.0.verdict" in gate.unreadable
    assert gate.status == ReadinessStatusView()
    wanted = Wanted(release="r2")
    assert judge(gate, wanted) is None and settled(gate, wanted) is None
    assert "status unreadable (checks.0.verdict" in timed_out(gate, wanted, 3.0).message


def test_a_readable_status_is_judged_from_its_models() -> None:
    decision = judge(ReadinessObject.read(_gate()), Wanted(release="r2"))
    assert decision is not None and (decision.verdict, decision.reason) == ("Fail", "ProxyNacked")
    assert decision.release is not None and decision.release.revision == "r2"
    assert [o.name for o in decision.outcomes] == ["xds-sync"]


def test_an_absent_status_is_an_empty_one() -> None:
    raw = _gate()
    del raw["status"]
    gate = ReadinessObject.read(raw)
    assert gate.unreadable is None and gate.status.checks == [] and gate.status.release is None
    assert CheckRow.model_validate(_gate()["status"]["checks"][0]).outcome().outcome == Verdict.FAIL
