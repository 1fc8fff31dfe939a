"""MCPReadiness and MCPBenchmark objects as the API returns them, for the board and the report:
a drill's status built by the operator's own builders (``running_status``, ``verdict_status``,
``drill_status``, the KPI board of ``drill.kpi``, the journal of ``drill.journal``, the plan of
``drill.profile``), so a change of a status shape shows here; every status is validated through
the CRD's status model."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_operator.api.benchmark import MCPBenchmarkStatus
from mcp_operator.api.drill import DrillSpec
from mcp_operator.api.readiness import MCPReadinessStatus
from mcp_operator.readiness.drill import journal as jr
from mcp_operator.readiness.drill.kpi import FaultTiming, board, jump_points
from mcp_operator.readiness.drill.load import StageFigures, WindowFigures
from mcp_operator.readiness.drill.profile import expand
from mcp_operator.readiness.drill.summary import stage_summary, wire
from mcp_operator.readiness.status import drill_status, running_status, verdict_status

URL = "http://srv.demo.svc:8000"
STARTED = "2026-05-01T12:00:00.000Z"
COMPLETED = "2026-05-01T12:03:40.000Z"
SPEC = DrillSpec.model_validate(
    {
        "profile": "MCP2026",
        "scale": 0.5,  # baseline 30 s, mixed 30 s, spike 45 s
        "stages": [
            {
                "name": "mixed",
                "faults": [
                    {
                        "kind": "scaleDown",
                        "workload": "srv",
                        "replicas": 1,
                        "atSeconds": 5,
                        "holdSeconds": 10,
                    },
                    {"kind": "podKill", "pods": {"matchLabels": {"app": "srv"}}, "atSeconds": 20},
                ],
            }
        ],
    }
)


def _figures(
    p99: float, rate: float, errors: int = 0, seconds: float = 30.0, jump: float | None = None
) -> StageFigures:
    """A stage of two windows; with ``jump``, the second one's P99 (and all errors) is that."""
    completed = int(rate * seconds)
    half = completed // 2
    windows = (
        WindowFigures(0.0, p99, half, 0 if jump else errors // 2),
        WindowFigures(seconds / 2, jump or p99, completed - half, errors - (0 if jump else errors // 2)),
    )
    return StageFigures(
        requested=f"{rate:g} req/s",
        achieved_rps=completed / seconds,
        p50_ms=p99 / 3,
        p99_ms=max(p99, jump or 0),
        completed=completed,
        errors=errors,
        windows=windows,
        sent=completed + errors,
    )


def _stage_row(name: str, figures: StageFigures | None) -> dict[str, Any]:
    """A ``status.stages`` row of a stage that ran, as the drill's own builder writes it."""
    stage = next(s for s in expand(SPEC) if s.name == name)
    return wire(stage_summary(stage, "Done", figures))


def _journal(revert_failed: bool) -> list[dict[str, Any]]:
    journal: list[dict[str, Any]] = []
    journal = jr.planned(
        journal,
        fault_id="mixed-0",
        stage="mixed",
        kind="scaleDown",
        target="Deployment/srv 3 -> 1 replicas",
        undo={"replicas": 3},
        now="2026-05-01T12:00:34.900Z",
    )
    journal = jr.updated(journal, "mixed-0", phase="Injected", injected_at="2026-05-01T12:00:35.000Z")
    journal = jr.updated(journal, "mixed-0", phase="Reverted", reverted_at="2026-05-01T12:00:45.000Z")
    journal = jr.planned(
        journal,
        fault_id="mixed-1",
        stage="mixed",
        kind="podKill",
        target="Pod/srv-abc",
        undo={},
        now="2026-05-01T12:00:49.900Z",
    )
    journal = jr.updated(journal, "mixed-1", phase="Injected", injected_at="2026-05-01T12:00:50.000Z")
    if revert_failed:
        return jr.updated(journal, "mixed-1", phase="RevertFailed", message="ApiException: 503")
    return jr.updated(journal, "mixed-1", phase="Reverted", reverted_at="2026-05-01T12:01:00.000Z")


def drill_object(*, failing: bool = False, name: str = "mcp2026") -> dict[str, Any]:
    """A finished MCP2026 drill with two faults in its mixed stage: passing, or (``failing``) with
    a P99 jump in the spike, an outage that never recovered and a revert that failed."""
    figures = [
        ("baseline", _figures(12.0, 250)),
        ("mixed", _figures(18.0, 1600, errors=3 if failing else 0)),
        (
            "spike",
            _figures(30.0, 4480, errors=900 if failing else 0, seconds=45, jump=240.0 if failing else None),
        ),
    ]
    recoveries = [
        FaultTiming("mixed-0", "mixed", "scaleDown", 2.5, outage=True),
        FaultTiming("mixed-1", "mixed", "podKill", None if failing else 1.2, outage=True),
    ]
    rows = board(
        ok=sum(f.completed for _, f in figures),
        total=sum(f.completed + f.errors for _, f in figures),
        stages=figures,
        recoveries=recoveries,
        hot_updates=[],
        thresholds=SPEC.kpis,
    )
    stages = [_stage_row(n, f) for n, f in figures]
    jumped = {j.stage: j.offset_s for j in jump_points(figures, SPEC.kpis.p99_jump_factor)}
    for row in stages:  # as the drill adds them
        if row["name"] in jumped:
            row["p99JumpAtSeconds"] = round(jumped[row["name"]], 2)
    drill = SimpleNamespace(
        stages=stages,
        kpis=[r.to_wire() for r in rows],
        journal=_journal(revert_failed=failing),
        reverted=not failing,
    )
    health = CheckOutcome(
        "health-probe",
        Verdict.PASS,
        "HealthMet",
        "100/100 probes answered",
        {"requests": "100", "p99": "3.1 ms"},
        {"minSuccessRatio": "0.99", "maxP99Ms": "250"},
    )
    running = running_status([], 1, URL, STARTED)
    running["plan"] = [s.to_wire() for s in expand(SPEC)]
    status, _ = verdict_status(running, 1, URL, STARTED, [health, *(r.outcome() for r in rows)], COMPLETED)
    status = {**running, **status, **drill_status(drill, status["conditions"], 1, COMPLETED)}
    return readiness_object(name, status)


def evaluating_object() -> dict[str, Any]:
    """The passing drill's object once a new round has been claimed (mid-drill: stage 2/3)."""
    decided = drill_object()
    status = decided["status"]
    running = running_status(status["conditions"], 2, URL, "2026-05-01T13:00:00.000Z")
    merged = {k: v for k, v in {**status, **running}.items() if v is not None}
    merged.update(
        stage="2/3",
        stages=[
            {"name": "baseline", "phase": "Done", "requested": "250 req/s", "p99Ms": "11.00"},
            {"name": "mixed", "phase": "Running", "requested": "1600 req/s"},
            {"name": "spike", "phase": "Pending", "requested": "4480 req/s"},
        ],
        kpis=[],
        faults=[],
        checks=[],
    )
    obj = readiness_object("mcp2026", merged)
    obj["metadata"]["generation"] = 2
    return obj


def readiness_object(name: str, status: dict[str, Any]) -> dict[str, Any]:
    MCPReadinessStatus.model_validate(status)
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": name, "namespace": "demo", "generation": 1},
        "spec": {"target": {"url": URL}},
        "status": status,
    }


def benchmark_object(*, slo_met: bool = True) -> dict[str, Any]:
    """A finished MCPBenchmark of two levels, two shards (one result rejected)."""
    verdict = "Pass" if slo_met else "Fail"
    status = {
        "observedGeneration": 1,
        "phase": "Succeeded",
        "verdict": verdict,
        "jobName": "bench-x1",
        "targetUrl": URL,
        "p99Ms": "41.20",
        "throughputRps": "398.5",
        "shards": {"expected": 2, "reported": 2, "rejected": 1, "succeeded": 2},
        "results": [
            {
                "level": "c=8",
                "requests": 4000,
                "errors": 0,
                "throughputRps": "199.9",
                "meanMs": "9.10",
                "p50Ms": "8.00",
                "p95Ms": "15.00",
                "p99Ms": "20.10",
                "slo": "Pass",
            },
            {
                "level": "c=16",
                "requests": 7970,
                "errors": 30,
                "throughputRps": "398.5",
                "meanMs": "19.00",
                "p50Ms": "17.00",
                "p95Ms": "33.00",
                "p99Ms": "41.20",
                "slo": verdict,
            },
        ],
        "diagnostics": [
            {
                "trap": 3,
                "key": "queueing",
                "name": "Queueing behind a saturated batch",
                "state": "Found",
                "summary": "P99 grows 2x from c=8 to c=16 while throughput saturates",
                "level": "c=16",
            },
            {"trap": 4, "key": "cold-start", "name": "Cold start", "state": "NotFound", "summary": "none"},
        ],
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if slo_met else "False",
                "reason": "SloMet" if slo_met else "SloMissed",
                "message": "every level met its SLO" if slo_met else "c=16: P99 41.2 ms > 30 ms",
                "lastTransitionTime": "2026-05-01T12:10:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    MCPBenchmarkStatus.model_validate(status)
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPBenchmark",
        "metadata": {"name": "bench", "namespace": "demo", "generation": 1},
        "spec": {},
        "status": status,
    }
