"""MCPReadiness domain logic: target resolution, semantic problems, checks and status shapes."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from tests.httpserve import serving

from mcp_checks.health import HealthProbeSpec, required_samples
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_operator.api import MCPReadinessSpec, MCPReadinessStatus
from mcp_operator.api.readiness import MAX_CHECK_HISTORY
from mcp_operator.conditions import condition
from mcp_operator.readiness.evaluate import resolve_target, run_checks, semantic_problems
from mcp_operator.readiness.status import rejected_status, running_status, verdict_status
from mcp_operator.targets import SpecProblem, join_url
from mcp_refserver import RunningServer

T0 = "2026-01-01T00:00:00Z"


def _spec(**checks: Any) -> MCPReadinessSpec:
    probe = {"requests": 100, "minSuccessRatio": 0.99} | checks
    return MCPReadinessSpec.model_validate(
        {"target": {"url": "http://svc:8000"}, "checks": {"healthProbe": probe}}
    )


class Services:
    """The Services that exist, as the operator's API read would answer; records what was asked."""

    def __init__(self, *existing: tuple[str, str]) -> None:
        self.existing = set(existing)
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, namespace: str, name: str) -> bool:
        self.asked.append((namespace, name))
        return (namespace, name) in self.existing


def _ref_spec(ref: dict[str, Any]) -> MCPReadinessSpec:
    return MCPReadinessSpec.model_validate({"target": {"serviceRef": ref}})


async def test_url_target_needs_no_lookup() -> None:
    services = Services()
    spec = MCPReadinessSpec.model_validate({"target": {"url": "https://triton.ml.svc:8443/base"}})
    assert await resolve_target(spec, "default", services) == "https://triton.ml.svc:8443/base"
    assert services.asked == []


async def test_service_target_resolves_in_its_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TARGET_ALLOW_NAMESPACES", "team")  # another namespace, allowed by name
    services = Services(("ml", "triton"), ("team", "vllm"))
    got = await resolve_target(_ref_spec({"name": "triton", "port": 8000}), "ml", services)
    assert got == "http://triton.ml.svc:8000"
    explicit = _ref_spec({"name": "vllm", "namespace": "team", "scheme": "https", "port": 443})
    assert await resolve_target(explicit, "ml", services) == "https://vllm.team.svc:443"
    assert services.asked == [("ml", "triton"), ("team", "vllm")]


async def test_missing_service_is_target_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TARGET_ALLOW_NAMESPACES", "*")
    services = Services(("ml", "triton"))
    got = await resolve_target(_ref_spec({"name": "triton", "namespace": "other"}), "ml", services)
    assert isinstance(got, SpecProblem)
    assert got.reason == "TargetNotFound"
    assert "other/triton" in got.message


def test_default_spec_has_no_problems() -> None:
    """The shipped defaults (10000 probes for 99.99%) can be verified as written."""
    spec = MCPReadinessSpec.model_validate({"target": {"url": "http://svc"}})
    assert semantic_problems(spec) == []


@pytest.mark.parametrize(
    ("ratio", "requests", "impossible"),
    [
        (0.9999, 9999, True),
        (0.9999, 10000, False),
        (0.99, 99, True),
        (0.99, 100, False),
        (0.999, 1000, False),
        (0.5, 1, True),
        (1.0, 1, True),  # no round verifies 1.0
    ],
)
def test_impossible_threshold(ratio: float, requests: int, impossible: bool) -> None:
    problems = semantic_problems(_spec(minSuccessRatio=ratio, requests=requests))
    assert [p.reason for p in problems] == (["ImpossibleThreshold"] if impossible else [])
    if impossible:
        assert "checks.healthProbe.minSuccessRatio" in problems[0].message
        needed = required_samples(ratio)
        assert (f"at least {needed}" if needed else "no finite round") in problems[0].message


def test_no_checks_is_a_problem() -> None:
    spec = MCPReadinessSpec.model_validate({"target": {"url": "http://svc"}, "checks": {"healthProbe": None}})
    assert [p.reason for p in semantic_problems(spec)] == ["NoChecks"]


async def test_the_spec_reaches_the_probe_as_written() -> None:
    """The operator's validated spec goes through the same builder as ``mcp-check -f``."""
    spec = _spec(
        path="/v2/health/ready",
        timeoutMs=250,
        expectedStatus=[200, 204],
        maxP50Ms=5,
        maxRoundMs=900,
        warnP99Ms=40,
        warnSuccessRatio=0.999,
    )
    seen: list[HealthProbeSpec] = []

    async def capture(probe: HealthProbeSpec) -> CheckOutcome:
        seen.append(probe)
        return CheckOutcome("health-probe", Verdict.PASS, "Captured", "")

    (outcome,) = await run_checks(spec, "http://svc:8000/", "ns", health_probe=capture)
    (probe,) = seen
    assert outcome.reason == "Captured"
    assert probe.url == "http://svc:8000/v2/health/ready"
    assert probe.timeout_s == 0.25 and probe.expected_status == (200, 204)
    assert probe.requests == 100 and probe.min_success_ratio == 0.99
    assert (probe.max_p50_ms, probe.max_p99_ms, probe.max_round_ms) == (5, 500.0, 900)
    assert (probe.warn_p99_ms, probe.warn_success_ratio, probe.max_prober_lag_ms) == (40, 0.999, None)
    assert join_url("http://a", "/b") == join_url("http://a/", "/b") == "http://a/b"


async def test_run_checks_against_a_real_server(refserver: RunningServer) -> None:
    (outcome,) = await run_checks(_spec(concurrency=4, maxProberLagMs=1000), refserver.url, "ns")
    assert outcome.name == "health-probe"
    assert (outcome.outcome, outcome.reason) == (Verdict.PASS, "HealthProbePassed")
    assert outcome.observed["requests"] == "100" and outcome.observed["succeeded"] == "100"


def _outcome(kind: Verdict, reason: str) -> CheckOutcome:
    return CheckOutcome(
        "health-probe", kind, reason, f"{reason} seen", {"p99": "1.00ms"}, {"maxP99": "500.00ms"}
    )


def test_more_rows_than_status_holds_keep_the_worst_and_the_verdict_over_all() -> None:
    """A drill with many faults gives a recovery row per fault: past the CRD's row limit the
    status keeps the worst rows in order (never a write the API server rejects)."""
    many = [
        CheckOutcome(f"kpi:recoverySeconds:f{i}", Verdict.PASS, "WithinThreshold", "ok") for i in range(140)
    ]
    many[70] = CheckOutcome("kpi:recoverySeconds:f70", Verdict.FAIL, "AboveThreshold", "slow")
    status, verdict = verdict_status({}, 1, "http://svc", T0, many, T0)
    MCPReadinessStatus.model_validate(status)
    assert verdict.outcome == Verdict.FAIL and len(status["checks"]) == MAX_CHECK_HISTORY
    assert "kpi:recoverySeconds:f70" in [row["name"] for row in status["checks"]]


@pytest.mark.parametrize(
    ("kind", "reason", "ready", "phase"),
    [
        (Verdict.PASS, "HealthProbePassed", "True", "Succeeded"),
        (Verdict.FAIL, "HealthBelowThreshold", "False", "Failed"),
        (Verdict.ERROR, "TargetUnreachable", "False", "Failed"),
    ],
)
def test_verdict_status_shape(kind: Verdict, reason: str, ready: str, phase: str) -> None:
    status, verdict = verdict_status({}, 7, "http://svc:8000", T0, [_outcome(kind, reason)], T0)
    MCPReadinessStatus.model_validate(status)  # nothing the CRD would prune
    assert status["observedGeneration"] == 7 and status["phase"] == phase
    assert status["verdict"] == kind.value and status["targetUrl"] == "http://svc:8000"
    assert status["startedAt"] == T0 and status["completedAt"] >= T0
    assert status["score"] == (100 if kind == Verdict.PASS else 0) == verdict.score
    (row,) = status["checks"]
    assert row["name"] == "health-probe" and row["verdict"] == kind.value and row["reason"] == reason
    assert row["observed"] == {"p99": "1.00ms"} and row["thresholds"] == {"maxP99": "500.00ms"}
    assert "measuredAt" in row
    accepted, ready_cond = (
        condition(status["conditions"], "Accepted"),
        condition(status["conditions"], "Ready"),
    )
    assert accepted is not None and accepted["status"] == "True" and accepted["observedGeneration"] == 7
    assert ready_cond is not None and ready_cond["status"] == ready and ready_cond["observedGeneration"] == 7
    expected_reason = "ChecksPassed" if kind == Verdict.PASS else reason
    assert ready_cond["reason"] == expected_reason == verdict.reason


def test_invalid_status_shape() -> None:
    problems = [SpecProblem("ImpossibleThreshold", "too few probes"), SpecProblem("NoChecks", "nothing")]
    status = rejected_status([], 3, problems, T0)
    MCPReadinessStatus.model_validate(status)
    assert status["phase"] == "Invalid" and status["verdict"] == "Error" and status["score"] == 0
    assert status["observedGeneration"] == 3 and status["checks"] == []
    for kind in ("Accepted", "Ready"):
        cond = condition(status["conditions"], kind)
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
            "False",
            "ImpossibleThreshold",
            3,
        )
        assert cond["message"] == "too few probes; nothing"


def test_running_then_verdict_keeps_accepted_transition() -> None:
    running = running_status([], 2, "http://svc", T0)
    MCPReadinessStatus.model_validate(running)
    ready = condition(running["conditions"], "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("Unknown", "Evaluating")
    accepted = condition(running["conditions"], "Accepted")
    assert accepted is not None
    accepted["lastTransitionTime"] = T0  # as if accepted earlier
    status, _ = verdict_status(running, 2, "http://svc", T0, [_outcome(Verdict.PASS, "Ok")], T0)
    after = condition(status["conditions"], "Accepted")
    assert after is not None and after["lastTransitionTime"] == T0


def test_no_outcomes_is_not_ready() -> None:
    status, verdict = verdict_status({}, 1, "http://svc", T0, [], T0)
    assert verdict.ready is False
    assert (status["verdict"], status["phase"]) == ("Inconclusive", "Inconclusive")
    ready = condition(status["conditions"], "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "NoChecks")


def test_the_health_probe_is_on_unless_disabled_and_nothing_enabled_is_no_checks() -> None:
    off = MCPReadinessSpec.model_validate(
        {"target": {"url": "http://svc"}, "checks": {"healthProbe": {"enabled": False}}}
    )
    assert [p.reason for p in semantic_problems(off)] == ["NoChecks"]
    xds_only = MCPReadinessSpec.model_validate(
        {
            "target": {"url": "http://svc"},
            "checks": {"xdsSync": {"sources": [{"kind": "csds", "address": "cp:18000"}]}},
        }
    )
    assert semantic_problems(xds_only) == []
    # the probe stays on beside xdsSync, in the operator as in mcp-check -f
    from mcp_checks.suite import plan_checks
    from mcp_operator.readiness.evaluate import suite_checks

    assert [c.name for c in plan_checks(suite_checks(xds_only))] == ["health-probe", "xds-sync"]
    assert [c.name for c in plan_checks({"xdsSync": {"sources": []}})] == ["health-probe", "xds-sync"]


async def test_every_row_says_how_long_its_check_took() -> None:
    spec = MCPReadinessSpec.model_validate(
        {
            "target": {"url": "http://127.0.0.1:1"},
            "checks": {
                "healthProbe": {"enabled": False},
                "metricDrift": {
                    "prometheusUrl": "http://127.0.0.1:1",
                    "rules": [{"record": "r"}],
                    "timeoutSeconds": 1,
                },
            },
        }
    )
    (row,) = await run_checks(spec, "http://127.0.0.1:1", "ns")
    assert row.name == "metric-drift" and row.outcome == Verdict.INCONCLUSIVE
    assert row.duration_s is not None and 0 <= row.duration_s < 5


async def test_another_namespace_is_not_allowed_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_TARGET_ALLOW_NAMESPACES", raising=False)
    services = Services(("team", "vllm"))
    got = await resolve_target(_ref_spec({"name": "vllm", "namespace": "team"}), "ml", services)
    assert isinstance(got, SpecProblem) and got.reason == "TargetNotAllowed"
    assert "MCP_TARGET_ALLOW_NAMESPACES" in got.message
    assert services.asked == []  # refused before the Service is even read


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data", "http://metadata.google.internal/", "http://[fe80::1]:8000/"],
)
async def test_metadata_and_link_local_targets_are_not_allowed(url: str) -> None:
    spec = MCPReadinessSpec.model_validate({"target": {"url": url}})
    got = await resolve_target(spec, "ml", Services())
    assert isinstance(got, SpecProblem) and got.reason == "TargetNotAllowed", got


def test_one_rule_for_verifiability_and_bounds_that_keep_a_verdict_meaningful() -> None:
    """1.0 is verified by no round (it used to pass with 10 probes while 0.9999 with 50 was refused);
    a ratio under 0.5 and status codes outside 100-599 are schema errors."""
    from pydantic import ValidationError

    perfect = _spec(minSuccessRatio=1.0, requests=100_000)
    (problem,) = semantic_problems(perfect)
    assert problem.reason == "ImpossibleThreshold" and "no finite round" in problem.message
    for bad in (
        {"minSuccessRatio": 0.0},
        {"minSuccessRatio": 0.4},
        {"expectedStatus": [999]},
        {"expectedStatus": [-1]},
    ):
        with pytest.raises(ValidationError):
            _spec(**bad)


CANARY = "CANARY-71c2"
CREDENTIALED = [f"user:{CANARY}@", f"?token={CANARY}", f"?%74oken={CANARY}"]


def _readiness(target_url: str = "http://svc:8000", **spec: Any) -> MCPReadinessSpec:
    return MCPReadinessSpec.model_validate({"target": {"url": target_url}, **spec})


def _url_with(base: str, credential: str) -> str:
    """``base`` (scheme://host[:port]) carrying ``credential``: userinfo, or a query."""
    if credential.endswith("@"):
        scheme, _, rest = base.partition("://")
        return f"{scheme}://{credential}{rest}" if rest else f"{credential}{base}"
    return f"{base}/{credential}"


def _each_url_field(credential: str) -> list[tuple[str, MCPReadinessSpec]]:
    """One spec per URL field of MCPReadiness, that field carrying ``credential``."""
    drill = {"stages": [{"name": "s", "load": {"rate": 1, "durationSeconds": 1}}]}
    query = credential.startswith("?")
    specs = [
        ("spec.target.url", _readiness(_url_with("http://svc:8000", credential))),
        (
            "spec.checks.xdsSync.sources[1].address",
            _readiness(
                checks={
                    "xdsSync": {
                        "sources": [
                            {"kind": "csds", "address": "istiod:15010"},
                            {"kind": "syncz", "address": _url_with("http://istiod:15014", credential)},
                        ]
                    }
                }
            ),
        ),
        (
            "spec.checks.metricDrift.prometheusUrl",
            _readiness(
                checks={
                    "metricDrift": {
                        "prometheusUrl": _url_with("http://prom:9090", credential),
                        "rules": [{"record": "r", "expr": "up"}],
                    }
                }
            ),
        ),
        (
            "spec.drill.serverRequests.urls[0]",
            _readiness(
                drill={
                    **drill,
                    "serverRequests": {"urls": [_url_with("http://svc:8000", credential)], "counters": ["c"]},
                }
            ),
        ),
    ]
    if query:  # a path has no userinfo
        specs += [
            ("spec.checks.healthProbe.path", _readiness(checks={"healthProbe": {"path": f"/h{credential}"}})),
            (
                "spec.drill.stages[0].load.path",
                _readiness(
                    drill={
                        "stages": [
                            {
                                "name": "s",
                                "load": {"rate": 1, "durationSeconds": 1, "path": f"/x{credential}"},
                            }
                        ]
                    }
                ),
            ),
        ]
    if not query:  # CSDS is host:port: userinfo only
        specs.append(
            (
                "spec.checks.xdsSync.sources[0].address",
                _readiness(
                    checks={
                        "xdsSync": {"sources": [{"kind": "csds", "address": f"{credential}istiod:15010"}]}
                    }
                ),
            )
        )
    return specs


@pytest.mark.parametrize(
    ("field", "spec"),
    [case for credential in CREDENTIALED for case in _each_url_field(credential)],
    ids=[f"{field}:{c[:6]}" for c in CREDENTIALED for field, _ in _each_url_field(c)],
)
def test_a_url_field_with_credentials_is_refused(field: str, spec: MCPReadinessSpec) -> None:
    """What an older CRD let in is refused by the operator: CredentialsInUrl first, naming the
    field and never repeating the credential."""
    problems = semantic_problems(spec)
    assert problems and problems[0].reason == "CredentialsInUrl", problems
    assert field in problems[0].message and CANARY not in problems[0].message


def test_clean_url_fields_raise_no_credentials_problem() -> None:
    spec = _readiness(
        checks={
            "healthProbe": {"path": "/health?verbose=1"},
            "xdsSync": {"sources": [{"kind": "csds", "address": "istiod:15010"}]},
            "metricDrift": {
                "prometheusUrl": "http://prom:9090/base",
                "rules": [{"record": "r", "expr": "up"}],
            },
        }
    )
    assert "CredentialsInUrl" not in [p.reason for p in semantic_problems(spec)]


async def test_every_check_connects_through_the_operators_target_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operator injects its policy into the checks (``mcp_checks`` cannot import it): with an
    allow-list that leaves loopback out, the health probe, metricDrift's Prometheus and the xDS
    sources (syncz, Envoy admin, CSDS) are each refused where they connect, on the address they
    connect to. They were dialled (5 connections to a disallowed address); now every row says
    why and nothing reaches the real server."""
    hits: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    async with serving(app) as url:
        spec = MCPReadinessSpec.model_validate(
            {
                "target": {"url": url},
                "checks": {
                    "healthProbe": {"requests": 10, "concurrency": 2, "minSuccessRatio": 0.9},
                    "metricDrift": {"prometheusUrl": url, "rules": [{"record": "r", "expr": "up"}]},
                    "xdsSync": {
                        "sources": [
                            {"kind": "syncz", "address": url + "/debug/syncz"},
                            {"kind": "envoyAdmin", "address": url},
                            {"kind": "csds", "address": url.removeprefix("http://")},
                        ],
                        "timeoutSeconds": 2,
                    },
                },
            }
        )
        monkeypatch.setenv("MCP_TARGET_ALLOW_CIDRS", "10.0.0.0/8")
        rows = {row.name: row for row in await run_checks(spec, url, "ns")}
    assert hits == []
    assert set(rows) == {"health-probe", "metric-drift", "xds-sync"}
    for row in rows.values():
        assert row.outcome != Verdict.PASS, row
    health = rows["health-probe"]
    assert health.outcome == Verdict.ERROR and health.reason == "TargetNotAllowed", health
    assert "refused by the target policy" in rows["metric-drift"].message, rows["metric-drift"]
    xds = " ".join([rows["xds-sync"].message, *(f.observed for f in rows["xds-sync"].findings)])
    assert xds.count("refused by the target policy") >= 3, xds
