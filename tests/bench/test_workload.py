"""Workloads: token-length distributions, synthetic prompts and dataset files."""

from __future__ import annotations

import itertools
import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mcp_bench.workload import (
    ClampedNormalDist,
    DatasetError,
    DatasetWorkload,
    ExponentialDist,
    FixedDist,
    SyntheticWorkload,
    UniformDist,
    Workload,
    parse_distribution,
    payloads,
)


def take(workload: SyntheticWorkload | DatasetWorkload, n: int) -> list:
    return list(itertools.islice(payloads(workload), n))


def test_fixed_lengths_are_exact_word_counts() -> None:
    got = take(SyntheticWorkload(input_tokens=FixedDist(value=37), output_tokens=FixedDist(value=9)), 20)
    assert {len(p.prompt.split()) for p in got} == {37}
    assert {p.input_tokens for p in got} == {37}
    assert {p.max_output_tokens for p in got} == {9}


def test_uniform_lengths_stay_in_range_and_spread() -> None:
    w = SyntheticWorkload(input_tokens=UniformDist(low=10, high=50), output_tokens=UniformDist(low=1, high=8))
    got = take(w, 2000)
    ins = [p.input_tokens for p in got]
    assert min(ins) >= 10 and max(ins) <= 50
    assert all(len(p.prompt.split()) == p.input_tokens for p in got)
    assert abs(statistics.mean(ins) - 30) < 1.5
    assert len(set(ins)) > 30  # really spread, not a constant
    assert {p.max_output_tokens for p in got} <= set(range(1, 9))


def test_normal_is_clamped() -> None:
    d = ClampedNormalDist(mean=20, std=10, min=15, max=22)
    rng = random.Random(1)
    xs = [d.sample(rng) for _ in range(1000)]
    assert min(xs) == 15 and max(xs) == 22  # both clamps are hit
    assert d.quantile(0.01) == 15 and d.quantile(0.99) == 22


def test_same_seed_same_prompts_other_seed_differs() -> None:
    spec: dict[str, Any] = {"input_tokens": UniformDist(low=5, high=30), "output_tokens": FixedDist(value=4)}
    a = take(SyntheticWorkload(seed=7, **spec), 10)
    b = take(SyntheticWorkload(seed=7, **spec), 10)
    c = take(SyntheticWorkload(seed=8, **spec), 10)
    assert [p.prompt for p in a] == [p.prompt for p in b]
    assert [p.prompt for p in a] != [p.prompt for p in c]


@pytest.mark.parametrize(
    ("dist", "q", "expected"),
    [
        (UniformDist(low=20, high=80), 0.5, 50.0),
        (UniformDist(low=20, high=80), 0.99, 79.4),
        (ClampedNormalDist(mean=50, std=5), 0.5, 50.0),
        (ClampedNormalDist(mean=50, std=5), 0.99, 50 + 5 * 2.3263478740),
        (ExponentialDist(mean=10, offset=2), 0.5, 2 + 10 * 0.6931471806),
    ],
)
def test_quantiles_are_the_analytic_truth(dist: object, q: float, expected: float) -> None:
    assert dist.quantile(q) == pytest.approx(expected, rel=1e-6)  # type: ignore[attr-defined]


def test_sampled_quantile_agrees_with_analytic() -> None:
    d = ExponentialDist(mean=10)
    rng = random.Random(3)
    xs = sorted(d.sample(rng) for _ in range(20000))
    assert xs[len(xs) // 2] == pytest.approx(d.quantile(0.5), rel=0.05)


def test_parse_shorthands() -> None:
    assert parse_distribution("50") == FixedDist(value=50)
    assert parse_distribution(12) == FixedDist(value=12)
    assert parse_distribution("uniform:20:80") == UniformDist(low=20, high=80)
    assert parse_distribution("normal:50:5:40") == ClampedNormalDist(mean=50, std=5, min=40)
    assert parse_distribution({"kind": "exponential", "mean": 3}) == ExponentialDist(mean=3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("uniform:5", "uniform takes low:high"),
        ("zipf:1", "unknown kind 'zipf'"),
        ("normal:a:b", "must be numbers"),
        ("uniform:9:5", "high must be >= low"),
        ("-3", "greater than or equal to 0"),
    ],
)
def test_parse_errors_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_distribution(text)


def test_workload_union_reports_field_path() -> None:
    adapter: TypeAdapter[object] = TypeAdapter(Workload)
    with pytest.raises(ValidationError) as err:
        adapter.validate_python({"kind": "synthetic", "input_tokens": {"kind": "uniform", "low": 1}})
    assert "input_tokens.uniform.high" in str(err.value).replace("\n", " ").replace(" ", "")  # path is named
    w = adapter.validate_python({"kind": "synthetic", "output_tokens": {"kind": "fixed", "value": 3}})
    assert isinstance(w, SyntheticWorkload) and w.output_tokens == FixedDist(value=3)


def test_dataset_cycles_and_uses_defaults(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text(
        json.dumps({"prompt": "one two three", "max_tokens": 5}) + "\n\n" + json.dumps({"prompt": "x"}) + "\n"
    )
    got = take(DatasetWorkload(path=f, default_max_tokens=11), 5)
    assert [p.prompt for p in got] == ["one two three", "x", "one two three", "x", "one two three"]
    assert [p.max_output_tokens for p in got[:2]] == [5, 11]
    assert [p.input_tokens for p in got[:2]] == [3, 1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "ok"}\n{not json}\n', r"d\.jsonl:2: not JSON"),
        ('{"text": "no prompt"}\n', r"d\.jsonl:1: expected an object with a string 'prompt'"),
        ('{"prompt": "p", "max_tokens": 0}\n', r"d\.jsonl:1: 'max_tokens' must be a positive integer"),
        ("\n\n", r"d\.jsonl: no prompts"),
    ],
)
def test_dataset_errors_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text(content)
    with pytest.raises(DatasetError, match=message):
        take(DatasetWorkload(path=f), 1)


def test_missing_dataset_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        take(DatasetWorkload(path=tmp_path / "absent.jsonl"), 1)


def test_histogram_samples_follow_the_bins_and_quantiles_interpolate() -> None:
    h = parse_distribution({"kind": "histogram", "edges": [0, 100, 1000], "weights": [3, 1]})
    rng = random.Random(4)
    xs = [h.sample(rng) for _ in range(20_000)]
    assert all(0 <= x <= 1000 for x in xs)
    assert 0.73 < sum(x <= 100 for x in xs) / len(xs) < 0.77
    assert h.quantile(0.75) == pytest.approx(100)
    assert h.quantile(0.875) == pytest.approx(550)
    assert statistics.quantiles(xs, n=8)[6] == pytest.approx(550, rel=0.05)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"edges": [0, 1, 2], "weights": [1]}, "one more edge than weights"),
        ({"edges": [5, 1], "weights": [1]}, "non-decreasing"),
        ({"edges": [0, 1], "weights": [0]}, "positive sum"),
    ],
)
def test_histogram_refuses_bad_shapes(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_distribution({"kind": "histogram", **data})


def test_shared_prefix_is_the_same_words_in_every_prompt() -> None:
    w = SyntheticWorkload(
        input_tokens=UniformDist(low=40, high=80), output_tokens=FixedDist(value=4), shared_prefix_ratio=0.5
    )
    got = take(w, 50)
    longest = max(got, key=lambda p: p.input_tokens).prompt.split()
    for p in got:
        words = p.prompt.split()
        k = round(p.input_tokens * 0.5)
        assert len(words) == p.input_tokens
        assert words[:k] == longest[:k]  # one prefix, cut to each prompt's share
    tails = {" ".join(p.prompt.split()[round(p.input_tokens * 0.5) :]) for p in got}
    assert len(tails) == len(got)  # the rest differs per request


def test_no_shared_prefix_by_default() -> None:
    firsts = {" ".join(p.prompt.split()[:8]) for p in take(SyntheticWorkload(), 30)}
    assert len(firsts) == 30


def test_a_plan_refuses_a_bad_builtin_workload_before_any_load() -> None:
    from mcp_bench.plan import PlanError, RunPlan

    base: dict[str, Any] = {
        "url": "http://127.0.0.1:1",
        "backend": "openai",
        "model": "m",
        "levels": {"concurrency": [1]},
        "stage": {"requests": 1},
    }
    bad = {"kind": "synthetic", "input_tokens": {"kind": "histogram", "edges": [0, 1], "weights": [1, 2]}}
    with pytest.raises(PlanError, match=r"payload: .*workload: .*one more edge than weights"):
        RunPlan.from_dict({**base, "payload": {"workload": bad}})
    RunPlan.from_dict({**base, "payload": {"workload": {"kind": "synthetic", "shared_prefix_ratio": 0.3}}})
