"""The reference's definitions of a record against what Prometheus has loaded, without
Prometheus: each way they can differ, and expressions compared by meaning."""

from __future__ import annotations

from mcp_checks.drift import ExpectedRule, LoadedRule, verify_loaded, whitespace_normalised
from mcp_checks.drift.normalise import Comparison
from mcp_checks.verdict import Verdict

NOW = 1_700_000_000.0
ORIGIN = "PrometheusRule mon/bed"
SOURCE = "http://prom:9090"
# what Prometheus's printer makes of each text (format_query), for the tests' expressions
FAITHFUL = "sum by (route) (rate(bed_requests_total[1m]))"
DRIFTED = FAITHFUL + " * 1.005"
PRINTED = {
    "sum(rate(bed_requests_total[60s])) by (route)": FAITHFUL,
    FAITHFUL: FAITHFUL,
    DRIFTED: DRIFTED,
}
RECORD = "route:bed_requests_drifted:rate1m"


def printed(expected: str, loaded: str) -> Comparison:
    return Comparison(PRINTED[expected] == PRINTED[loaded], "format_query")


def expected(expr: str, **labels: str) -> ExpectedRule:
    return ExpectedRule(RECORD, expr, tuple(sorted(labels.items())), "bed", ORIGIN)


def loaded(
    query: str,
    *,
    health: str = "ok",
    last_error: str = "",
    age_s: float | None = 0.4,
    interval_s: float | None = 30.0,
    group: str = "bed",
    **labels: str,
) -> LoadedRule:
    last = None if age_s is None else NOW - age_s
    return LoadedRule(
        RECORD, query, tuple(sorted(labels.items())), health, last_error, last, group, interval_s
    )


def test_the_same_rule_reprinted_by_prometheus_passes() -> None:
    out = verify_loaded(
        RECORD,
        [expected("sum(rate(bed_requests_total[60s])) by (route)")],
        [loaded("sum by (route) (rate(bed_requests_total[1m]))")],
        printed,
        NOW,
        SOURCE,
    )
    assert (out.outcome, out.reason) == (Verdict.PASS, "RuleLoadedAsReferenced"), out.message
    assert out.observed == {f"{RECORD}.reference": ORIGIN}


def test_a_changed_expression_fails_naming_the_rule_and_both_expressions() -> None:
    ref = "sum by (route) (rate(bed_requests_total[1m]))"
    got = "sum by (route) (rate(bed_requests_total[1m])) * 1.005"
    out = verify_loaded(RECORD, [expected(ref)], [loaded(got)], printed, NOW, SOURCE)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RuleExpressionChanged")
    assert RECORD in out.message and f"`{got}`" in out.message and f"`{ref}`" in out.message
    assert ORIGIN in out.message and SOURCE in out.message
    [finding] = out.findings
    assert (finding.reason, finding.observed, finding.threshold) == (
        "RuleExpressionChanged",
        f"loaded `{got}`",
        f"`{ref}`",
    )


def test_a_rule_prometheus_has_not_loaded_fails() -> None:
    out = verify_loaded(RECORD, [expected("sum(x)")], [], printed, NOW, SOURCE)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RuleNotLoaded")
    assert RECORD in out.message and ORIGIN in out.message


def test_a_definition_whose_labels_are_not_loaded_is_missing_and_the_loaded_one_unexpected() -> None:
    ref = "sum by (route) (rate(bed_requests_total[1m]))"
    out = verify_loaded(RECORD, [expected(ref, team="a")], [loaded(ref, team="b")], printed, NOW, SOURCE)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RuleNotLoaded")
    assert {f.reason: f.subject for f in out.findings} == {
        "RuleNotLoaded": f'{RECORD}{{team="a"}}',
        "UnexpectedRuleDefinition": f'{RECORD}{{team="b"}}',
    }


def test_an_extra_loaded_definition_of_the_record_fails() -> None:
    ref = "sum by (route) (rate(bed_requests_total[1m]))"
    extra = "sum by (route) (rate(bed_requests_total[1m])) * 1.005"
    out = verify_loaded(
        RECORD, [expected(ref)], [loaded(ref), loaded(extra, group="hotfix")], printed, NOW, SOURCE
    )
    assert (out.outcome, out.reason) == (Verdict.FAIL, "UnexpectedRuleDefinition")
    assert "group hotfix" in out.message and extra in out.message


def test_pairs_by_expression_first_so_two_definitions_in_any_order_pass() -> None:
    a, b = (
        "sum by (route) (rate(bed_requests_total[1m]))",
        "sum by (route) (rate(bed_requests_total[1m])) * 1.005",
    )
    out = verify_loaded(RECORD, [expected(a), expected(b)], [loaded(b), loaded(a)], printed, NOW, SOURCE)
    assert out.outcome == Verdict.PASS, out.message


def test_an_unhealthy_rule_fails_with_its_last_error() -> None:
    ref = "sum by (route) (rate(bed_requests_total[1m]))"
    out = verify_loaded(
        RECORD,
        [expected(ref)],
        [loaded(ref, health="err", last_error="many-to-many matching not allowed")],
        printed,
        NOW,
        SOURCE,
    )
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RecordingRuleUnhealthy")
    assert "many-to-many matching not allowed" in out.message


def test_evaluation_older_than_two_intervals_lags() -> None:
    ref = "sum by (route) (rate(bed_requests_total[1m]))"
    fresh = verify_loaded(RECORD, [expected(ref)], [loaded(ref, age_s=60.0)], printed, NOW, SOURCE)
    assert fresh.outcome == Verdict.PASS  # 60 s of a 30 s interval: at the limit (plus slack), not past it
    late = verify_loaded(RECORD, [expected(ref)], [loaded(ref, age_s=95.0)], printed, NOW, SOURCE)
    assert (late.outcome, late.reason) == (Verdict.FAIL, "RuleEvaluationLagging")
    assert "95.0s ago" in late.message and "every 30s" in late.message
    assert late.findings[0].threshold.startswith("<= 61s")
    never = verify_loaded(RECORD, [expected(ref)], [loaded(ref, age_s=None)], printed, NOW, SOURCE)
    assert (never.outcome, never.reason) == (Verdict.INCONCLUSIVE, "RuleNotEvaluatedYet")
    unknown = verify_loaded(
        RECORD, [expected(ref)], [loaded(ref, age_s=1e6, interval_s=None)], printed, NOW, SOURCE
    )
    assert unknown.outcome == Verdict.PASS  # no interval reported: lag is not judged


def test_a_text_comparison_says_why_it_was_not_formatted() -> None:
    def text_only(a: str, b: str) -> Comparison:
        return Comparison(whitespace_normalised(a) == whitespace_normalised(b), "compared as text (404)")

    same = verify_loaded(
        RECORD, [expected("sum by (route)(x)")], [loaded("sum by (route) (x)")], text_only, NOW, SOURCE
    )
    assert same.outcome == Verdict.PASS and same.observed[f"{RECORD}.comparison"] == "compared as text (404)"
    changed = verify_loaded(
        RECORD, [expected("sum(x) by (route)")], [loaded("sum by (route) (x)")], text_only, NOW, SOURCE
    )
    assert changed.reason == "RuleExpressionChanged" and "(compared as text (404))" in changed.message


def test_whitespace_normalised_text() -> None:
    assert whitespace_normalised("sum by (job)\n  (rate(x[1m]))") == "sum by(job)(rate(x[1m]))"
    assert whitespace_normalised("sum  by(job) ( rate( x[1m] ) )") == "sum by(job)(rate(x[1m]))"
    assert whitespace_normalised("a or b") != whitespace_normalised("aor b")  # words stay apart
    assert whitespace_normalised('x{route="/v1  chat"}') == 'x{route="/v1  chat"}'  # strings verbatim
    assert whitespace_normalised('x{route = "a"}') == 'x{route="a"}'
