"""Properties of the verdict ladders, over generated inputs (hypothesis): the run's verdict is the
worst check whatever their order, and the health probe's verdict only gets worse with failures
and only better with faster answers."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_checks.health import HealthProbeSpec, ProbeSamples, evaluate, required_samples
from mcp_checks.verdict import READY_OUTCOMES, SEVERITY, CheckOutcome, Verdict, decide, worst

# no deadline (a busy shared machine); the same examples every run; nothing written into the repository
PROPERTIES = settings(deadline=None, max_examples=100, derandomize=True, database=None)

verdicts = st.sampled_from(list(Verdict))
outcome_lists = st.lists(verdicts, min_size=1, max_size=12)


def _checks(outcomes: list[Verdict]) -> list[CheckOutcome]:
    return [CheckOutcome(f"c{i}", o, f"{o.value}Reason{i}", f"message {i}") for i, o in enumerate(outcomes)]


@PROPERTIES
@given(outcome_lists, st.data())
def test_worst_is_the_most_severe_whatever_the_order(outcomes: list[Verdict], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(outcomes))
    assert worst(outcomes) == worst(shuffled) == max(outcomes, key=SEVERITY.__getitem__)
    assert all(SEVERITY[o] <= SEVERITY[worst(outcomes)] for o in outcomes)


@PROPERTIES
@given(outcome_lists, outcome_lists)
def test_worst_of_a_union_is_the_worse_of_the_parts(a: list[Verdict], b: list[Verdict]) -> None:
    assert worst(a + b) == worst([worst(a), worst(b)])


@PROPERTIES
@given(outcome_lists)
def test_a_run_is_ready_only_when_every_check_is_pass_or_warn(outcomes: list[Verdict]) -> None:
    verdict = decide(_checks(outcomes))
    assert verdict.outcome == worst(outcomes)
    assert verdict.ready is all(o in READY_OUTCOMES for o in outcomes)
    assert verdict.score == round(100 * outcomes.count(Verdict.PASS) / len(outcomes))
    if not verdict.ready:  # the first of the worst checks says why
        first = next(i for i, o in enumerate(outcomes) if o == verdict.outcome)
        assert verdict.reason == f"{verdict.outcome.value}Reason{first}"


@PROPERTIES
@given(outcome_lists, verdicts)
def test_one_more_check_never_improves_a_run(outcomes: list[Verdict], extra: Verdict) -> None:
    before, after = decide(_checks(outcomes)), decide(_checks([*outcomes, extra]))
    assert SEVERITY[after.outcome] >= SEVERITY[before.outcome]
    assert after.ready <= before.ready


# --- the health probe's ladder ----------------------------------------------------------------

latencies = st.lists(st.floats(min_value=0.1, max_value=2000.0, allow_nan=False), min_size=1, max_size=60)
failure_kinds = st.sampled_from(["http_503", "http_404", "timeout", "connect", "disconnected"])
ratios = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99])
limits = st.one_of(st.none(), st.floats(min_value=1.0, max_value=1500.0))


@st.composite
def specs(draw: st.DrawFn) -> HealthProbeSpec:
    ratio = draw(ratios)
    return HealthProbeSpec(
        url="http://127.0.0.1:1/health",
        min_success_ratio=ratio,
        max_p50_ms=draw(limits),
        max_p99_ms=draw(limits),
        max_round_ms=None,
        warn_success_ratio=draw(st.one_of(st.none(), st.floats(min_value=ratio, max_value=1.0))),
        warn_p99_ms=draw(limits),
    )


def _samples(ok_ms: list[float], failures: Counter[str]) -> ProbeSamples:
    return ProbeSamples(latencies_ms=list(ok_ms), failures=Counter(failures), round_ms=100.0)


def _severity(spec: HealthProbeSpec, samples: ProbeSamples) -> int:
    return SEVERITY[evaluate(spec, samples).outcome]


@PROPERTIES
@given(
    specs(), latencies, st.lists(failure_kinds, max_size=20), st.lists(failure_kinds, min_size=1, max_size=20)
)
def test_more_failures_never_improve_a_round_that_had_enough_probes(
    spec: HealthProbeSpec, ok_ms: list[float], some: list[str], more: list[str]
) -> None:
    """Once a round has the probes its threshold needs, failures only lower the ratio. (Below
    that, one more probe of either kind is more evidence: 1 success is Inconclusive at 0.5, a
    success and a failure measure 50 %.)"""
    needed = required_samples(spec.min_success_ratio) or 0
    ok_ms = (ok_ms * needed)[: max(len(ok_ms), needed)]
    before = _samples(ok_ms, Counter(some))
    after = _samples(ok_ms, Counter(some) + Counter(more))
    assert _severity(spec, after) >= _severity(spec, before)


@PROPERTIES
@given(specs(), latencies, st.lists(failure_kinds, max_size=5), st.floats(min_value=0.01, max_value=1.0))
def test_faster_answers_never_worsen_a_round(
    spec: HealthProbeSpec, ok_ms: list[float], failed: list[str], factor: float
) -> None:
    """Every answer ``factor`` times as long (so P50 and P99 no higher): never a worse verdict."""
    before = _samples(ok_ms, Counter(failed))
    after = _samples([v * factor for v in ok_ms], Counter(failed))
    assert _severity(spec, after) <= _severity(spec, before)


@PROPERTIES
@given(specs(), latencies)
def test_a_round_without_failures_passes_only_when_it_had_enough_probes(
    spec: HealthProbeSpec, ok_ms: list[float]
) -> None:
    outcome = evaluate(spec, _samples(ok_ms, Counter()))
    needed = required_samples(spec.min_success_ratio)
    if outcome.outcome in READY_OUTCOMES:
        assert needed is not None and len(ok_ms) >= needed
    else:
        assert outcome.reason in {"InsufficientSamples", "LatencyAboveThreshold"}
