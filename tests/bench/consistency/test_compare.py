"""The comparison functions and the judge: token mismatch, L2 distances, the mergeable L2
histogram, and the states (no comparison is NoData, never NotFound)."""

from __future__ import annotations

import math
import random

import pytest

from mcp_bench.consistency.compare import (
    Comparison,
    answer_tokens,
    compare_answers,
    counts,
    l2_distance,
    mismatch_rate,
    relative_l2,
    token_mismatch,
)
from mcp_bench.plan import Consistency, PlanError, RunPlan
from mcp_bench.results.consistency import judge, merge_figures
from mcp_bench.results.l2spread import L2Spread


def test_token_mismatch_counts_changed_and_missing_tokens() -> None:
    assert token_mismatch(["a", "b", "c"], ["a", "b", "c"]) == (0, 3)
    assert token_mismatch(["a", "b", "c"], ["a", "x", "c"]) == (1, 3)
    # a shorter answer: the missing tokens are mismatches, over the longer length
    assert token_mismatch(["a", "b", "c", "d"], ["a", "b"]) == (2, 4)
    assert token_mismatch(["a"], ["a", "b", "c"]) == (2, 3)
    assert mismatch_rate(["a", "b"], ["b", "a"]) == 1.0
    assert mismatch_rate([], []) is None


def test_l2_and_relative_l2() -> None:
    assert l2_distance([0.0, 0.0], [3.0, 4.0]) == 5.0
    assert l2_distance([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert relative_l2([3.0, 4.0], [3.0, 4.5]) == pytest.approx(0.5 / 5.0)
    assert relative_l2([0.0, 0.0], [0.0, 2.0]) == 2.0  # a zero reference: the absolute distance
    with pytest.raises(ValueError, match="3 and 2"):
        l2_distance([1.0, 2.0, 3.0], [1.0, 2.0])


def test_answers_openai_tokens_and_logprobs() -> None:
    rest = {"text": " tok0 tok1 tok2", "tokens": [" tok0", " tok1", " tok2"], "logprobs": [-0.1, -0.2, -0.3]}
    same = compare_answers(rest, dict(rest))
    assert same == Comparison(0, 3, 0.0)
    drifted = {
        "text": " tok0 alt1 tok2",
        "tokens": [" tok0", " alt1", " tok2"],
        "logprobs": [-0.1, -0.2, -0.33],
    }
    c = compare_answers(rest, drifted, "absolute")
    assert (c.mismatched, c.positions) == (1, 3)
    assert c.l2 == pytest.approx(0.03)
    # without tokens from the server: the text's words
    assert answer_tokens({"text": " a b  c"}) == ["a", "b", "c"]
    shorter = compare_answers({"text": "a b c"}, {"text": "a b"})
    assert (shorter.mismatched, shorter.positions, shorter.l2, shorter.unmatched) == (1, 3, None, False)


def test_answers_v2_tensors() -> None:
    rest = {
        "tensors": {"OUT": {"values": [3.0, 4.0], "shape": [1, 2]}, "SUM": {"values": [7.0], "shape": [1]}}
    }
    moved = {
        "tensors": {"OUT": {"values": [3.0, 4.0], "shape": [1, 2]}, "SUM": {"values": [7.5], "shape": [1]}}
    }
    c = compare_answers(rest, moved, "absolute")
    assert c.l2 == pytest.approx(0.5) and c.positions == 0
    assert compare_answers(rest, moved).l2 == pytest.approx(0.5 / math.sqrt(9 + 16 + 49))
    reshaped = {
        "tensors": {"OUT": {"values": [3.0, 4.0], "shape": [2, 1]}, "SUM": {"values": [7.0], "shape": [1]}}
    }
    assert compare_answers(rest, reshaped).unmatched
    assert compare_answers(rest, {"tensors": {"OUT": rest["tensors"]["OUT"]}}).unmatched


def test_spread_quantiles_and_exact_merge() -> None:
    rng = random.Random(7)
    values = [0.0] * 50 + [10 ** rng.uniform(-8, 1) for _ in range(950)]
    whole, a, b = L2Spread(), L2Spread(), L2Spread()
    for i, v in enumerate(values):
        whole.add(v)
        (a if i % 3 else b).add(v)
    a.merge(L2Spread.decode(b.encode()))
    assert a.encode() == whole.encode()
    ordered = sorted(values)
    for q in (0.5, 0.9, 0.99):
        true = ordered[math.ceil(q * len(values)) - 1]
        got = whole.quantile(q)
        assert got is not None and true <= got <= true * 1.0101  # the bucket's upper edge, 1 % wide
    assert whole.quantile(0.01) == 0.0
    assert whole.quantile(1.0) == max(values) == whole.max
    assert L2Spread().quantile(0.99) is None


CFG = Consistency(threshold_l2=1e-3, threshold_mismatch=0.05)


def test_judge_states() -> None:
    clean = judge(counts([Comparison(0, 8, 0.0)] * 4, probes=4, failed=0), CFG)
    assert clean["state"] == "NotFound" and clean["mismatch_rate"] == 0.0 and clean["l2_max"] == 0.0
    tokens = judge(counts([Comparison(1, 8, None)] * 4, probes=4, failed=0), CFG)
    assert tokens["state"] == "Found" and tokens["mismatch_rate"] == pytest.approx(0.125)
    l2 = judge(counts([Comparison(0, 0, 0.0), Comparison(0, 0, 0.01)], probes=2, failed=0), CFG)
    assert l2["state"] == "Found" and l2["l2_max"] == 0.01 and "L2 max" in l2["reason"]
    shape = judge(counts([Comparison(0, 0, None, unmatched=True)], probes=1, failed=0), CFG)
    assert shape["state"] == "Found"
    # nothing compared is never a pass
    none = judge(counts([], probes=4, failed=4), CFG)
    assert none["state"] == "NoData" and "4 failed" in none["reason"]
    empty = judge(counts([Comparison(0, 0, None)], probes=1, failed=0), CFG)
    assert empty["state"] == "NoData"
    unstable = judge(counts([Comparison(0, 8, 0.0)], probes=1, failed=0, unstable="at rest ..."), CFG)
    assert unstable["state"] == "NoData" and unstable["reason"].startswith("no baseline")


def test_merge_pools_tokens_and_distances() -> None:
    a = counts([Comparison(0, 100, 0.0)] * 10, probes=10, failed=0)
    b = counts([Comparison(10, 100, 0.002)] * 2 + [Comparison(0, 100, 0.0)] * 8, probes=11, failed=1)
    merged = merge_figures([judge(a, CFG), judge(b, CFG)], CFG)
    assert merged is not None
    assert (merged["probes"], merged["failed"], merged["compared"]) == (21, 1, 20)
    assert merged["mismatch_rate"] == pytest.approx(20 / 2000)  # pooled, not the mean of rates
    assert merged["l2_max"] == 0.002 and merged["state"] == "Found"  # one shard's drift is the level's
    assert merge_figures([None, None], CFG) is None
    unstable = counts([], probes=0, failed=0, unstable="at rest the answers differ")
    assert merge_figures([judge(a, CFG), judge(unstable, CFG)], CFG)["state"] == "NoData"  # type: ignore[index]


def test_plan_section() -> None:
    base = {"url": "http://x", "levels": {"concurrency": [1]}, "stage": {"requests": 1}}
    plan = RunPlan.from_dict(
        {**base, "backend": "openai", "consistency": {"probes": 3, "threshold_l2": 0.01}}
    )
    assert plan.consistency is not None and plan.consistency.probes == 3
    with pytest.raises(PlanError, match="consistency needs"):
        RunPlan.from_dict({**base, "consistency": {}})
    with pytest.raises(PlanError, match=r"consistency\.probes"):
        RunPlan.from_dict({**base, "backend": "openai", "consistency": {"probes": 0}})
