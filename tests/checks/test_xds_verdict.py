"""The xDS sync verdict whole, from answers built here: every outcome with its message, figures
and limits, every finding with its subject, limit and source, the order findings are told in,
and each edge of the ladder (found by mutation testing: the verdicts were tested, most of what
a row says was not)."""

from __future__ import annotations

from mcp_checks.verdict import Finding, Verdict
from mcp_checks.xds import XdsMemory, XdsSyncSpec, judge
from mcp_checks.xds.evaluate import MAX_LISTED, effective
from mcp_checks.xds.model import ProxyReport, SourceAnswer, SyncState, TypeStatus

NOW = 1_800_000_000.0
TYPES = ("LDS", "CDS")
SYNCED, STALE, REJECTED, UNKNOWN = SyncState.SYNCED, SyncState.STALE, SyncState.REJECTED, SyncState.UNKNOWN


def _spec(**kw: object) -> XdsSyncSpec:
    return XdsSyncSpec(sources=(), types=TYPES, **kw)  # type: ignore[arg-type]


def _proxy(proxy_id: str, state: SyncState = SYNCED, version: str = "v1", **kw: object) -> ProxyReport:
    return ProxyReport(proxy_id, tuple(TypeStatus(t, state, version, **kw) for t in TYPES))  # type: ignore[arg-type]


def _answer(*proxies: ProxyReport, source: str = "csds:cp") -> SourceAnswer:
    return SourceAnswer(source, proxies)


def _findings(outcome_findings: list[Finding]) -> list[tuple[str, Verdict, str, str, str, str]]:
    return [(f.subject, f.outcome, f.reason, f.observed, f.threshold, f.source) for f in outcome_findings]


def test_no_source_at_all() -> None:
    outcome = judge(_spec(), [], NOW)
    assert (outcome.name, outcome.outcome, outcome.reason, outcome.message) == (
        "xds-sync",
        Verdict.INCONCLUSIVE,
        "NoSources",
        "no xDS source is configured",
    )


def test_a_pass_says_how_many_on_which_types_and_version_and_against_what() -> None:
    spec = _spec(expected_proxies=("a", "b"), expected_version="v1", min_proxies=1)
    outcome = judge(spec, [_answer(_proxy("a"), _proxy("b"))], NOW)
    assert (outcome.name, outcome.outcome, outcome.reason) == ("xds-sync", Verdict.PASS, "ProxiesSynced")
    assert outcome.message == "2 proxies synced on LDS,CDS on version v1 (2 expected, at least 1 required)"
    assert outcome.observed == {
        "sourcesAnswered": "1",
        "proxiesExpected": "2",
        "proxiesReported": "2",
        "expectedFrom": "2 expected, at least 1 required",
        "synced": "4",
        "unknown": "0",
        "stale": "0",
        "rejected": "0",
        "proxy/a": "LDS=synced CDS=synced",
        "proxy/b": "LDS=synced CDS=synced",
    }
    assert outcome.thresholds == {
        "graceSeconds": "30",
        "types": "LDS,CDS",
        "expectedVersion": "v1",
        "minProxies": "1",
    }
    assert (outcome.source, outcome.findings) == ("csds:cp", [])


def test_a_pass_on_a_minimum_alone_has_no_expected_list() -> None:
    outcome = judge(_spec(min_proxies=2), [_answer(_proxy("a"), _proxy("b"))], NOW)
    assert outcome.message == "2 proxies synced on LDS,CDS (at least 2 required)"
    assert (outcome.observed["proxiesExpected"], outcome.observed["expectedFrom"]) == (
        "-",
        "at least 2 required",
    )
    assert "expectedVersion" not in outcome.thresholds


def test_sources_that_do_not_answer_say_so_and_nothing_else() -> None:
    answers = [
        SourceAnswer("csds:a", unreachable="connection refused"),
        SourceAnswer("csds:b", malformed="not a ClientStatusResponse"),
    ]
    outcome = judge(_spec(expected_proxies=("a",)), answers, NOW)
    assert (outcome.outcome, outcome.reason, outcome.source) == (
        Verdict.ERROR,
        "MalformedAnswer",
        "csds:a, csds:b",
    )
    assert outcome.message == "csds:b: not a ClientStatusResponse"
    assert outcome.observed == {"sourcesAnswered": "0"}
    assert _findings(outcome.findings) == [
        ("csds:b", Verdict.ERROR, "MalformedAnswer", "not a ClientStatusResponse", "", "csds:b"),
        ("csds:a", Verdict.INCONCLUSIVE, "SourceUnreachable", "connection refused", "answers", "csds:a"),
    ]


def test_who_should_be_there_and_is_not() -> None:
    memory = XdsMemory(proxies_seen={"gone": NOW - 12.5})
    spec = _spec(expected_proxies=("a", "gone", "never"), min_proxies=3)
    outcome = judge(spec, [_answer(_proxy("a"), _proxy("extra"))], NOW, memory)
    assert (outcome.name, outcome.outcome, outcome.reason) == ("xds-sync", Verdict.FAIL, "ProxyDisappeared")
    assert _findings(outcome.findings) == [
        (
            "gone",
            Verdict.FAIL,
            "ProxyDisappeared",
            "reported 12.5s ago and by no source now",
            "reported",
            "csds:cp",
        ),
        ("never", Verdict.FAIL, "ProxyMissing", "no source reports this proxy", "reported", "csds:cp"),
        (
            "target",
            Verdict.FAIL,
            "TooFewProxies",
            "1 proxies reported, at least 3 required",
            ">= 3 proxies",
            "csds:cp",
        ),
        (
            "extra",
            Verdict.WARN,
            "ProxyNotInCluster",
            "reported by the control plane but not selected by the target",
            "selected",
            "csds:cp",
        ),
    ]
    assert outcome.message == (
        "gone: reported 12.5s ago and by no source now; never: no source reports this proxy; "
        "target: 1 proxies reported, at least 3 required"
    )


def test_no_expected_set_in_each_of_its_forms() -> None:
    none_selected = judge(_spec(expected_proxies=()), [_answer(_proxy("a"))], NOW)
    assert _findings(none_selected.findings)[0] == (
        "target",
        Verdict.INCONCLUSIVE,
        "NoProxiesSelected",
        "the target selects no proxy",
        ">= 1 proxy",
        "csds:cp",
    )
    none_reported = judge(_spec(), [_answer()], NOW)
    assert _findings(none_reported.findings) == [
        (
            "target",
            Verdict.INCONCLUSIVE,
            "NoProxiesReported",
            "the sources report no proxy at all, and the spec says none may be missing",
            ">= 1 proxy",
            "csds:cp",
        )
    ]
    unvouched = judge(_spec(), [_answer(_proxy("a"))], NOW)
    assert _findings(unvouched.findings) == [
        (
            "target",
            Verdict.INCONCLUSIVE,
            "NoExpectedProxies",
            "1 proxies reported, but nothing independent says who should be there: name them "
            "(proxies.ids, --proxy), select their pods (proxies.matchLabels or service, --selector) or set "
            "minProxies (--min-proxies)",
            "an expected set",
            "csds:cp",
        )
    ]
    assert unvouched.observed["expectedFrom"] == "no expected set"


def test_a_rejection_names_the_version_and_the_clients_error() -> None:
    answer = _answer(
        ProxyReport(
            "a", (TypeStatus("LDS", REJECTED, "v2", detail="bad listener"), TypeStatus("CDS", REJECTED))
        )
    )
    outcome = judge(_spec(expected_proxies=("a",)), [answer], NOW)
    assert _findings(outcome.findings) == [
        ("a/LDS", Verdict.FAIL, "ProxyNacked", "NACKed version v2: bad listener", "ACKED", "csds:cp"),
        ("a/CDS", Verdict.FAIL, "ProxyNacked", "NACKed version ?: ", "ACKED", "csds:cp"),
    ]


def test_stale_is_inconclusive_within_the_grace_and_fails_from_it_on() -> None:
    spec = _spec(expected_proxies=("a",), grace_s=30.0)
    within = judge(spec, [_answer(_proxy("a", STALE, since=NOW - 29.9, detail="behind"))], NOW)
    assert _findings(within.findings)[0] == (
        "a/LDS",
        Verdict.INCONCLUSIVE,
        "ProxyStale",
        "not converged yet: stale 29.9s at v1: behind",
        "stale < 30s",
        "csds:cp",
    )
    at_grace = judge(spec, [_answer(_proxy("a", STALE, since=NOW - 30.0, detail="behind"))], NOW)
    assert _findings(at_grace.findings)[0][1:4] == (Verdict.FAIL, "ProxyStale", "stale 30.0s at v1: behind")


def test_staleness_with_no_time_counts_from_the_first_look_that_saw_it() -> None:
    memory = XdsMemory()
    spec = _spec(expected_proxies=("a",))
    first = judge(spec, [_answer(_proxy("a", STALE, version=""))], NOW, memory)
    assert (
        first.findings[0].observed
        == "not converged yet: stale 0.0s (since unknown: counted from first seen) at ?: "
    )
    later = judge(spec, [_answer(_proxy("a", STALE, version=""))], NOW + 31, memory)
    assert later.findings[0].outcome == Verdict.FAIL


def test_unknown_states_say_what_is_unknown() -> None:
    answer = _answer(
        ProxyReport(
            "a",
            (
                TypeStatus("LDS", UNKNOWN, missing=True),
                TypeStatus("CDS", UNKNOWN, detail="NOT_SENT"),
                TypeStatus("EDS", UNKNOWN),
            ),
        )
    )
    spec = XdsSyncSpec(sources=(), types=("LDS", "CDS", "EDS", "RDS"), expected_proxies=("a",))
    assert _findings(judge(spec, [answer], NOW).findings) == [
        (
            "a/LDS",
            Verdict.FAIL,
            "ResourceDoesNotExist",
            "the control plane says the requested resource does not exist",
            "exists",
            "csds:cp",
        ),
        ("a/CDS", Verdict.INCONCLUSIVE, "TypeNotReported", "status NOT_SENT", "ACKED", "csds:cp"),
        ("a/EDS", Verdict.INCONCLUSIVE, "TypeNotReported", "status unknown", "ACKED", "csds:cp"),
        ("a/RDS", Verdict.INCONCLUSIVE, "TypeNotReported", "status not reported", "ACKED", "csds:cp"),
    ]


def test_a_version_nobody_reported_is_named_against_the_expected_one() -> None:
    spec = _spec(expected_proxies=("a",), expected_version="v99")
    outcome = judge(spec, [_answer(_proxy("a", version=""))], NOW)
    assert _findings(outcome.findings)[0] == (
        "a/LDS",
        Verdict.INCONCLUSIVE,
        "VersionNotReported",
        "ACKed without a version, expected v99",
        "ACKED v99",
        "csds:cp",
    )


def test_one_rejected_update_makes_a_stale_proxy_a_rejection() -> None:
    spec = _spec(expected_version="v2")
    once = effective(spec, TypeStatus("LDS", SYNCED, "v1", rejections=1))
    assert (once.state, once.detail) == (REJECTED, "1 updates rejected; on version v1, expected v2")
    assert effective(spec, TypeStatus("LDS", SYNCED, "v1")).state == STALE


def test_the_worst_source_wins_and_a_tie_keeps_the_first() -> None:
    spec = _spec(expected_proxies=("a",))
    nacked = _answer(_proxy("a", REJECTED, detail="bad"), source="csds:one")
    synced = _answer(_proxy("a"), source="csds:two")
    assert judge(spec, [nacked, synced], NOW).reason == "ProxyNacked"
    stale_one = _answer(_proxy("a", STALE, since=NOW - 100, detail="one"), source="csds:one")
    stale_two = _answer(_proxy("a", STALE, since=NOW - 100, detail="two"), source="csds:two")
    first = judge(spec, [stale_one, stale_two], NOW).findings[0]
    assert (first.observed, first.source) == ("stale 100.0s at v1: one", "csds:one")


def test_a_rejection_is_told_before_the_staleness_it_leaves_behind() -> None:
    answer = _answer(_proxy("a", STALE, since=NOW - 100), _proxy("b", REJECTED, detail="bad"))
    outcome = judge(_spec(expected_proxies=("a", "b")), [answer], NOW)
    assert outcome.reason == "ProxyNacked"
    assert [f.reason for f in outcome.findings] == ["ProxyNacked", "ProxyNacked", "ProxyStale", "ProxyStale"]


def test_a_message_names_five_and_counts_the_rest() -> None:
    six = [_proxy(f"p{i}", REJECTED, detail="x") for i in range(3)]  # 6 findings: 3 proxies x 2 types
    outcome = judge(_spec(expected_proxies=tuple(f"p{i}" for i in range(3))), [_answer(*six)], NOW)
    assert (
        outcome.message
        == "; ".join(
            [
                "p0/LDS: NACKed version v1: x",
                "p0/CDS: NACKed version v1: x",
                "p1/LDS: NACKed version v1: x",
                "p1/CDS: NACKed version v1: x",
                "p2/LDS: NACKed version v1: x",
            ]
        )
        + " (and 1 more)"
    )
    five = [
        ProxyReport(f"p{i}", (TypeStatus("LDS", REJECTED, "v1", detail="x"), TypeStatus("CDS", SYNCED, "v1")))
        for i in range(5)
    ]
    outcome = judge(_spec(expected_proxies=tuple(f"p{i}" for i in range(5))), [_answer(*five)], NOW)
    assert outcome.message.endswith("p4/LDS: NACKed version v1: x")  # exactly five: nothing more to count


def test_at_most_fifty_proxies_are_listed_and_all_are_counted() -> None:
    ids = tuple(f"p{i:03d}" for i in range(MAX_LISTED + 1))
    outcome = judge(_spec(expected_proxies=ids), [_answer(*(_proxy(p) for p in ids))], NOW)
    assert outcome.outcome == Verdict.PASS
    assert len([k for k in outcome.observed if k.startswith("proxy/")]) == MAX_LISTED
    assert outcome.observed["synced"] == str(2 * len(ids)) and outcome.observed["proxiesReported"] == str(
        len(ids)
    )
