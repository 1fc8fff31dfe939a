"""The operator's target policy: what a spec may point the operator's own requests at."""

from __future__ import annotations

import ipaddress

import pytest

from mcp_operator.policy import TargetPolicy


@pytest.mark.parametrize(
    ("host", "addresses", "allowed"),
    [
        ("svc", ["10.96.0.12"], True),
        ("127.0.0.1", ["127.0.0.1"], True),
        ("imds", ["169.254.169.254"], False),
        ("v6", ["fe80::1%eth0"], False),
        ("aws-v6", ["fd00:ec2::254"], False),
        ("metadata.google.internal", ["203.0.113.5"], False),  # by name, whatever it resolves to
        # the metadata address in IPv6 clothing: mapped, mapped in hex, NAT64, 6to4, compatible
        ("::ffff:169.254.169.254", ["::ffff:169.254.169.254"], False),
        ("::ffff:a9fe:a9fe", ["::ffff:a9fe:a9fe"], False),
        ("64:ff9b::a9fe:a9fe", ["64:ff9b::a9fe:a9fe"], False),
        ("2002:a9fe:a9fe::1", ["2002:a9fe:a9fe::1"], False),
        ("::a9fe:a9fe", ["::a9fe:a9fe"], False),
        ("::1", ["::1"], True),
        ("::ffff:10.0.0.1", ["::ffff:10.0.0.1"], True),
    ],
)
def test_default_policy(host: str, addresses: list[str], allowed: bool) -> None:
    assert (TargetPolicy().address_problem(host, addresses) is None) is allowed


def test_an_allow_list_confines_every_resolved_address() -> None:
    policy = TargetPolicy(allow_cidrs=(ipaddress.ip_network("10.0.0.0/8"),))
    assert policy.address_problem("svc", ["10.1.2.3"]) is None
    assert "outside MCP_TARGET_ALLOW_CIDRS" in (policy.address_problem("svc", ["10.1.2.3", "8.8.8.8"]) or "")
    assert policy.address_problem("v6", ["::ffff:10.1.2.3"]) is None  # the IPv4 address it reaches


async def test_urls_are_checked_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await TargetPolicy().url_problem("http://169.254.169.254/latest") is not None
    assert await TargetPolicy().url_problem("http://127.0.0.1:8000/health") is None
    strict = TargetPolicy(allow_cidrs=(ipaddress.ip_network("127.0.0.0/8"),))
    assert str(await strict.url_problem("http://8.8.8.8/")).endswith("outside MCP_TARGET_ALLOW_CIDRS")
    monkeypatch.setenv("MCP_TARGET_ALLOW_CIDRS", "127.0.0.0/8, 10.0.0.0/8")
    monkeypatch.setenv("MCP_TARGET_ALLOW_NAMESPACES", "a,b")
    loaded = TargetPolicy.from_env()
    assert len(loaded.allow_cidrs) == 2 and loaded.allow_namespaces == frozenset({"a", "b"})
    assert loaded.namespace_problem("ml", "a") is None and loaded.namespace_problem("ml", "c") is not None


@pytest.mark.parametrize(
    "policy", [TargetPolicy(), TargetPolicy(allow_cidrs=(ipaddress.ip_network("0.0.0.0/0"),))]
)
async def test_a_name_that_does_not_resolve_is_not_dialled_but_looked_at_again(policy: TargetPolicy) -> None:
    """It was allowed by default (the probe would say); now it is ``TargetUnresolved``, which
    the handlers retry: cluster DNS may be late, so it is never a refusal that stands."""
    problem = await policy.url_problem("http://no-such-host.invalid:8000/")
    assert problem is not None and problem.reason == "TargetUnresolved" and problem.retry
    assert "no-such-host.invalid does not resolve" in str(problem)


async def test_names_that_can_never_be_dialled_are_refused_without_a_lookup() -> None:
    metadata = await TargetPolicy().url_problem("http://metadata.google.internal/computeMetadata/v1")
    assert metadata is not None and metadata.reason == "TargetNotAllowed" and not metadata.retry
    unencodable = await TargetPolicy().url_problem(f"http://{'h' * 2030}.invalid:1/")
    assert unencodable is not None and unencodable.reason == "TargetNotAllowed"
    assert "not a host name a resolver can look up" in str(unencodable)


async def test_an_address_named_in_the_url_is_judged_in_every_ipv6_form() -> None:
    for host in ("[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]"):
        problem = await TargetPolicy().url_problem(f"http://{host}/latest")
        assert problem is not None and "link-local or metadata" in str(problem), host
