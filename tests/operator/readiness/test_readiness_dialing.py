"""The one target policy over every address an MCPReadiness makes the operator dial: with an
allow-list, a metricDrift Prometheus or an xDS source outside it is refused before any check runs
(they were dialled: 5 connections to a disallowed address)."""

from __future__ import annotations

import ipaddress

import pytest

from mcp_operator.api import MCPReadinessSpec
from mcp_operator.readiness.dialing import dial_problems, dialed_addresses
from mcp_operator.targets.policy import TargetPolicy

ALLOW_LOOPBACK = TargetPolicy(allow_cidrs=(ipaddress.ip_network("127.0.0.0/8"),))


def _spec(drift_url: str, sources: list[tuple[str, str]]) -> MCPReadinessSpec:
    return MCPReadinessSpec.model_validate(
        {
            "target": {"url": "http://127.0.0.1:8000"},
            "checks": {
                "metricDrift": {"prometheusUrl": drift_url, "rules": [{"record": "r", "expr": "up"}]},
                "xdsSync": {"sources": [{"kind": k, "address": a} for k, a in sources]},
            },
        }
    )


async def test_every_check_source_passes_the_policy_before_anything_is_dialled() -> None:
    spec = _spec(
        "http://10.9.9.9:9090",
        [
            ("syncz", "http://10.9.9.9:15014"),
            ("envoyAdmin", "http://127.0.0.1:15000"),
            ("csds", "10.9.9.9:18000"),
        ],
    )
    assert [w for w, _ in dialed_addresses(spec)] == [
        "spec.checks.metricDrift.prometheusUrl",
        "spec.checks.xdsSync.sources[0].address",
        "spec.checks.xdsSync.sources[1].address",
        "spec.checks.xdsSync.sources[2].address",
    ]
    problems = await dial_problems(spec, ALLOW_LOOPBACK)
    assert {p.reason for p in problems} == {"TargetNotAllowed"}
    assert [p.message.split(":", 1)[0] for p in problems] == [
        "spec.checks.metricDrift.prometheusUrl",
        "spec.checks.xdsSync.sources[0].address",
        "spec.checks.xdsSync.sources[2].address",  # a CSDS host:port too
    ]
    fine = _spec("http://127.0.0.1:9090", [("csds", "127.0.0.1:18000")])
    assert await dial_problems(fine, ALLOW_LOOPBACK) == []


async def test_the_metadata_address_is_refused_on_every_source_by_default() -> None:
    spec = _spec("http://[::ffff:169.254.169.254]/", [("csds", "169.254.169.254:80")])
    assert len(await dial_problems(spec, TargetPolicy())) == 2


async def test_a_name_no_resolver_can_encode_is_judged_not_raised() -> None:
    """A 2,048-character host (a label past 63 characters): IDNA refuses to encode it, which
    raised out of the handler and left the object without a verdict; it can never be dialled."""
    spec = _spec("http://127.0.0.1:9090", [("csds", f"{'h' * 2030}00.invalid:1") for _ in range(16)])
    for policy in (TargetPolicy(), ALLOW_LOOPBACK):
        problems = await dial_problems(spec, policy)
        assert len(problems) == 16 and {p.reason for p in problems} == {"TargetNotAllowed"}


async def test_a_source_that_does_not_resolve_is_a_retried_problem_naming_its_field() -> None:
    """Dialled by default before; now ``TargetUnresolved`` (the handler waits and looks again)."""
    spec = _spec("http://prometheus.nowhere.invalid:9090", [("syncz", "http://127.0.0.1:15014")])
    (problem,) = await dial_problems(spec, TargetPolicy())
    assert problem.reason == "TargetUnresolved"
    assert problem.message.startswith("spec.checks.metricDrift.prometheusUrl: prometheus.nowhere.invalid")


@pytest.mark.usefixtures("without_cluster_dns")
async def test_outside_the_cluster_a_cluster_only_source_is_unresolvable_and_a_plain_one_waits() -> None:
    """The operator dials every check source itself: outside the cluster a Service name can never
    resolve (``TargetUnresolvable``, standing); a plain name still may (``TargetUnresolved``)."""
    spec = _spec("http://prometheus.monitoring.svc:9090", [("syncz", "http://istiod.nowhere.invalid:15014")])
    outside = await dial_problems(spec, TargetPolicy(in_cluster=False))
    assert [(p.reason, p.message.split(":", 1)[0]) for p in outside] == [
        ("TargetUnresolvable", "spec.checks.metricDrift.prometheusUrl"),
        ("TargetUnresolved", "spec.checks.xdsSync.sources[0].address"),
    ]
    inside = await dial_problems(spec, TargetPolicy(in_cluster=True))
    assert {p.reason for p in inside} == {"TargetUnresolved"}
