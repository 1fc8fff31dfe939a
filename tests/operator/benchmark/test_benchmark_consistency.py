"""spec.consistency onto the plan: every field maps 1:1 onto plan.consistency, the CRD refuses
it for plain HTTP (a CEL rule) as the plan does, and the shard builds the probe observer; the
merged level's consistency reaches its status row (bounded)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_bench.cli_observers import plan_observers
from mcp_bench.consistency.compare import Comparison, counts
from mcp_bench.consistency.observer import ConsistencyObserver
from mcp_bench.plan import Consistency, PlanError
from mcp_bench.results.consistency import judge
from mcp_bench.results.document import EngineFingerprint, LevelResult, ResultDocument
from mcp_bench.results.summary import summarize
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.status import level_row
from mcp_operator.bounded import TIERS
from mcp_operator.crdgen import structural_schema

URL = "http://refserver.ml.svc:8000"


def _spec(backend: str = "openai", consistency: dict[str, Any] | None = None) -> MCPBenchmarkSpec:
    body: dict[str, Any] = {
        "target": {"url": URL, "backend": backend, "model": "refmodel"},
        "load": {"concurrency": [4, 64], "requests": 10},
    }
    if consistency is not None:
        body["consistency"] = consistency
    return MCPBenchmarkSpec.model_validate(body)


def test_fields_reach_the_plan() -> None:
    spec = _spec(
        "triton-http",
        {
            "probes": 6,
            "intervalSeconds": 0.5,
            "maxRounds": 10,
            "restRepeats": 3,
            "maxTokens": 32,
            "logprobs": False,
            "seed": 9,
            "l2": "absolute",
            "thresholdL2": 0.05,
            "thresholdMismatch": 0.02,
        },
    )
    plan = plan_from_spec(spec, URL, "b")
    assert plan.consistency == Consistency(
        probes=6,
        interval_s=0.5,
        max_rounds=10,
        rest_repeats=3,
        max_tokens=32,
        logprobs=False,
        seed=9,
        l2="absolute",
        threshold_l2=0.05,
        threshold_mismatch=0.02,
    )
    assert any(isinstance(o, ConsistencyObserver) for o in plan_observers(plan))


def test_defaults_match_the_plan_and_none_when_absent() -> None:
    assert plan_from_spec(_spec(consistency={}), URL, "b").consistency == Consistency()
    plan = plan_from_spec(_spec(), URL, "b")
    assert plan.consistency is None
    assert not any(isinstance(o, ConsistencyObserver) for o in plan_observers(plan))


def test_plain_http_is_refused() -> None:
    with pytest.raises(PlanError, match="consistency needs"):
        plan_from_spec(_spec("http", {}), URL, "b")
    rules = structural_schema(MCPBenchmarkSpec)["x-kubernetes-validations"]
    assert any("consistency" in r["rule"] and "'http'" in r["rule"] for r in rules)


def test_bounds() -> None:
    with pytest.raises(ValidationError, match="probes"):
        _spec(consistency={"probes": 0})
    with pytest.raises(ValidationError, match="thresholdMismatch"):
        _spec(consistency={"thresholdMismatch": 2})


def _document(consistency: dict[str, Any] | None) -> ResultDocument:
    plan = plan_from_spec(_spec(consistency={}), URL, "b")
    now = datetime(2026, 12, 3, tzinfo=UTC)
    level = LevelResult(index=0, mode="closed", concurrency=4, consistency=consistency)
    return ResultDocument(started_at=now, ended_at=now, engine=EngineFingerprint(), plan=plan, levels=[level])


def test_status_row_carries_the_levels_consistency() -> None:
    cfg = Consistency()
    figures = judge(counts([Comparison(1, 8, 0.01)] * 4, probes=4, failed=0), cfg)
    doc = _document(figures)
    row = level_row(summarize(doc, doc.levels[0]))
    assert row.output_consistency == "Found mismatch 12.50% L2 max 0.01"
    assert row.to_wire()["outputConsistency"] == row.output_consistency
    narrow = level_row(summarize(doc, doc.levels[0]), TIERS[-1])
    assert narrow.output_consistency is not None and len(narrow.output_consistency) <= TIERS[-1].field
    nothing = _document(judge(counts([], probes=4, failed=4), cfg))
    assert level_row(summarize(nothing, nothing.levels[0])).output_consistency == "NoData"
    unprobed = _document(None)
    assert "outputConsistency" not in level_row(summarize(unprobed, unprobed.levels[0])).to_wire()
