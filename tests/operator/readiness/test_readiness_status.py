"""MCPReadiness status carries no credential, whatever URL reached a check: the target URL and
every string a row, a condition or a KPI copies are redacted (the whole status JSON is searched)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from tests.operator.fakekube import merge_patch

from mcp_checks.verdict import CheckOutcome, Finding, Verdict
from mcp_operator.readiness.status import (
    drill_status,
    rejected_status,
    running_status,
    too_large_status,
    verdict_status,
)
from mcp_operator.targets import SpecProblem

T0 = "2026-01-01T00:00:00Z"
CANARY = "CANARY-d00d"
TARGETS = [
    f"http://user:{CANARY}@svc:8000",
    f"http://svc:8000/?token={CANARY}",
    f"http://svc:8000/base?%74oken={CANARY}",
]


def _leaky(target: str) -> list[CheckOutcome]:
    """Rows as checks write them against ``target``: its URL in every field they fill."""
    syncz = f"syncz:http://istiod:15014/?token={CANARY}"
    return [
        CheckOutcome(
            "health-probe",
            Verdict.FAIL,
            "HealthBelowThreshold",
            f"none of 100 probes of {target}/health?x=1 got an answer",
            {"failures": f"ConnectionError: {target}/health"},
            {"endpoint": f"{target}/health"},
            source=target,
        ),
        CheckOutcome(
            "xds-sync",
            Verdict.INCONCLUSIVE,
            "SourceUnreachable",
            f"{syncz} unreachable: GET /debug/syncz?token={CANARY} refused",
            source=syncz,
            findings=[
                Finding(
                    syncz,
                    Verdict.INCONCLUSIVE,
                    "SourceUnreachable",
                    f"/debug/syncz?token={CANARY}",
                    "answers",
                    syncz,
                )
            ],
        ),
    ]


def _text(status: dict[str, Any]) -> str:
    return json.dumps(status)


@pytest.mark.parametrize("target", TARGETS)
def test_a_verdict_status_carries_no_canary(target: str) -> None:
    running = running_status([], 1, target, T0, f"evaluating {target}")
    assert CANARY not in _text(running)
    status, _ = verdict_status(running, 1, target, T0, _leaky(target), T0)
    assert CANARY not in _text(status)
    assert status["targetUrl"].startswith("http://") and "REDACTED" in status["targetUrl"]
    assert "REDACTED" in status["checks"][0]["message"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_rejected_status_carries_no_canary(target: str) -> None:
    problem = SpecProblem("TargetNotAllowed", f"{target} resolves to 169.254.169.254")
    assert CANARY not in _text(rejected_status([], 2, [problem], T0))


def test_a_status_too_large_carries_no_canary() -> None:
    full, _ = verdict_status({}, 1, TARGETS[1], T0, _leaky(TARGETS[1]), T0)
    why = f"the object is too large: Request entity too large for /apis/x?token={CANARY}"
    assert CANARY not in _text(too_large_status(full, 1, T0, why))


def test_a_drill_kpi_carries_no_canary() -> None:
    kpi = {
        "name": "retryAmplification",
        "verdict": "Inconclusive",
        "mark": "?",
        "measured": f"unreadable: http://svc:8000/metrics?token={CANARY}",
        "threshold": "1.5",
    }
    drill = SimpleNamespace(stages=[], kpis=[kpi], journal=[], reverted=True)
    assert CANARY not in _text(drill_status(drill, [], 1, T0))


def test_an_evaluation_starting_removes_the_previous_verdict_and_score() -> None:
    """The claim's patch nulls verdict and score (a merge patch removes them): a printer column or
    a jsonpath wait never reads the previous release's verdict as this one's; history keeps it."""
    decided, _ = verdict_status({}, 1, "http://svc:8000", T0, _leaky("http://svc:8000")[:1], T0)
    assert decided["verdict"] == "Fail" and decided["score"] == 0
    running = running_status(decided["conditions"], 2, "http://svc:8000", T0)
    assert running["verdict"] is None and running["score"] is None
    after = merge_patch({"status": decided}, {"status": running})["status"]
    assert "verdict" not in after and "score" not in after
    assert after["history"][-1]["verdict"] == "Fail" and after["phase"] == "Running"
    ready = next(c for c in after["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "Evaluating")
