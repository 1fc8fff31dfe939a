"""Status bounded in bytes: one clip for every string copied into status, tiers of bounds tried
until a status fits its budget, and the verdict that still lands when the spec leaves no room."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from mcp_bench.diagnose.finding import Finding as TrapFinding
from mcp_checks.verdict import CheckOutcome, Finding, Verdict
from mcp_operator import kube
from mcp_operator.api import MCPBenchmarkStatus, MCPReadinessStatus
from mcp_operator.benchmark.status import diagnostic_row, engine_fingerprint, report_rejected_status
from mcp_operator.bounded import STATUS_BUDGET, TIERS, clip, clip_map, fit, json_size
from mcp_operator.conditions import condition, set_condition
from mcp_operator.readiness.status import STATUS_TOO_LARGE, too_large_status, verdict_status

T0 = "2026-01-01T00:00:00Z"


def test_a_clipped_text_fits_its_bytes_and_says_how_much_was_cut() -> None:
    assert clip("short", 64) == "short"
    cut = clip("h" * 2048, 256)
    assert len(cut.encode()) <= 256 and cut.endswith(" more characters)")
    kept = cut.split("…")[0]
    assert cut == f"{kept}… ({2048 - len(kept)} more characters)"
    wide = clip("é" * 1000, 101)  # never half a character
    assert len(wide.encode()) <= 101 and wide.startswith("é" * 10)
    assert clip("x" * 100, 5) == "xxxxx"  # no room to say so: a plain cut


def test_a_clipped_map_says_how_many_entries_it_left_out() -> None:
    bounds = TIERS[-1]
    clipped = clip_map({f"k{i}": "v" * 500 for i in range(20)}, bounds)
    assert len(clipped) == bounds.entries + 1 and clipped["…"] == f"{20 - bounds.entries} more"
    assert all(len(v.encode()) <= bounds.field for v in clipped.values())


def test_fit_takes_the_widest_bounds_that_fit() -> None:
    def build(bounds: Any) -> str:
        return "x" * bounds.text

    assert fit(build, len, budget=10_000) == "x" * TIERS[0].text
    assert fit(build, len, budget=TIERS[2].text) == "x" * TIERS[2].text
    assert fit(build, len, budget=1) == "x" * TIERS[-1].text  # the tightest when none fits


def test_a_condition_message_is_bounded() -> None:
    (cond,) = set_condition([], "Ready", False, "R" * 500, "m" * 100_000, 1, T0)
    assert len(cond["message"].encode()) <= 1024 and len(cond["reason"]) <= 128


def _largest_outcomes() -> list[CheckOutcome]:
    """What the largest spec leads to: 16 xDS sources with 2,048-character addresses, each a
    finding with the address in every field, and messages quoting them all."""
    address = "h" * 2030 + ".invalid:1"
    findings = [
        Finding(f"{i}:{address}", Verdict.ERROR, "SourceUnreachable", address * 2, address, address)
        for i in range(16)
    ]
    long = "; ".join(f"{address} unreachable" for _ in range(16))
    return [
        CheckOutcome(
            f"check-{n}",
            Verdict.ERROR,
            "SourceUnreachable",
            long,
            observed={f"source{i}": address for i in range(40)},
            thresholds={"address": address},
            source=address,
            findings=findings * 2,
        )
        for n in range(20)
    ]


def test_the_largest_rows_a_spec_can_cause_fit_the_budget() -> None:
    outcomes = _largest_outcomes()
    previous = {"history": [{"completedAt": T0, "verdict": "Error", "score": 0, "reason": "R" * 3000}] * 10}
    status, verdict = verdict_status(previous, 3, "http://svc/" + "p" * 2040, T0, outcomes, T0)
    size = json_size(status)
    assert size <= STATUS_BUDGET, size
    MCPReadinessStatus.model_validate(status)
    row = status["checks"][0]
    assert row["findingsTotal"] == 32 and 1 <= len(row["findings"]) < 32
    assert row["message"].endswith(" more characters)")
    ready = condition(status["conditions"], "Ready")
    assert ready is not None and ready["status"] == "False" and ready["reason"] == verdict.reason


def test_an_ordinary_status_is_not_cut() -> None:
    outcome = CheckOutcome("health-probe", Verdict.PASS, "Ok", "100/100 probes succeeded", {"p99": "1ms"})
    status, _ = verdict_status({}, 1, "http://svc:8000", T0, [outcome], T0)
    assert status["checks"][0]["message"] == "100/100 probes succeeded"


def test_a_status_too_large_for_the_object_keeps_the_verdict_without_rows() -> None:
    status, verdict = verdict_status({}, 4, "http://svc", T0, _largest_outcomes(), T0)
    fault = {"id": "f1", "stage": "s", "kind": "podKill", "target": "t", "phase": "Reverted", "plannedAt": T0}
    status["faults"] = [fault]
    small = too_large_status(status, 4, T0, "500 etcdserver: request is too large")
    assert small["checks"] == [] and small["verdict"] == "Error" and small["phase"] == "Failed"
    assert small["observedGeneration"] == 4 and small["evaluations"] == 1 and small["faults"] == [fault]
    ready = condition(small["conditions"], "Ready")
    assert ready is not None and ready["status"] == "False" and ready["reason"] == STATUS_TOO_LARGE
    assert ready["message"].startswith(f"{verdict.reason}: ") and "request is too large" in ready["message"]
    assert json_size(small) < 4096


def _refusal(status: int, message: str) -> ApiException:
    exc = ApiException(status=status, reason="Error")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def test_a_write_refused_for_its_size_is_never_retried() -> None:
    too_big = _refusal(500, "etcdserver: request is too large")
    assert kube.too_large(too_big) and kube.retry_delay(too_big, 0) is None
    assert kube.too_large(_refusal(413, "Request entity too large: limit is 3145728"))
    assert not kube.too_large(_refusal(500, "etcdserver: leader changed"))
    assert kube.retry_delay(_refusal(500, "etcdserver: leader changed"), 0) is not None
    assert kube.api_message(too_big) == "etcdserver: request is too large"


def test_benchmark_strings_from_the_shards_are_clipped() -> None:
    finding = TrapFinding(
        trap=3,
        key="false-wait",
        name="batch-fill wait",
        state="Found",
        summary="s" * 5000,
        level="c=" + "9" * 900,
        values={f"figure_{i}": "v" * 900 for i in range(60)},
        source="x" * 900,
    )
    rows = [diagnostic_row(finding, bounds) for bounds in TIERS]
    assert [json_size(r.to_wire()) for r in rows] == sorted(
        (json_size(r.to_wire()) for r in rows), reverse=True
    )
    assert json_size(rows[0].to_wire()) < 16 * 1024 and json_size(rows[-1].to_wire()) < 2048
    engine = engine_fingerprint({"server_name": "nginx/" + "1" * 5000})
    assert len(engine["serverName"].encode()) <= TIERS[0].field


def test_a_refused_report_fails_the_collected_status_once() -> None:
    collected = MCPBenchmarkStatus.model_validate(
        {"phase": "Succeeded", "verdict": "Pass", "results": [], "conditions": []}
    ).to_patch()
    status = report_rejected_status(collected, 2, "ConfigMap x-report was refused (403): exceeded quota", T0)
    ready = condition(status["conditions"], "Ready")
    assert status["phase"] == "Failed" and status["verdict"] == "Error"
    assert ready is not None and ready["reason"] == "ChildRejected" and "exceeded quota" in ready["message"]
