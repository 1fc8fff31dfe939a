"""The operator's target policy: what a spec may point the operator's own requests at."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path
from typing import Any

import pytest

from mcp_operator import settings
from mcp_operator.targets import policy
from mcp_operator.targets.policy import TargetPolicy


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


OUTSIDE = TargetPolicy(in_cluster=False)


@pytest.mark.parametrize(
    ("host", "cluster_only"),
    [
        ("triton.ml.svc", True),
        ("triton.ml.svc.", True),
        ("Triton.ML.SVC", True),
        ("triton.ml.svc.cluster.local", True),
        ("triton.ml.svc.corp.example", True),  # the cluster domain below
        ("triton", False),  # a short name may be this machine's alias
        ("triton.ml", False),
        ("svc", False),
        ("api.svc.example.com", False),  # a public name with a svc label
        ("no-such-host.invalid", False),
    ],
)
def test_cluster_only_names(host: str, cluster_only: bool) -> None:
    assert TargetPolicy(cluster_domain="corp.example").cluster_only(host) is cluster_only


@pytest.mark.parametrize(
    "url", ["http://triton.ml.svc:8000/v2", "http://triton.ml.svc.cluster.local:8000", "triton.ml.svc:18000"]
)
@pytest.mark.usefixtures("without_cluster_dns")
async def test_outside_the_cluster_a_cluster_only_name_is_unresolvable_at_once(url: str) -> None:
    """A cluster Service name the operator cannot resolve where it runs never will: a problem that
    stands (no retry), saying why and what to do."""
    problem = await OUTSIDE.url_problem(url)
    assert problem is not None and problem.reason == "TargetUnresolvable" and not problem.retry
    message = str(problem)
    assert "outside the cluster" in message and "run the operator in the cluster" in message
    assert "spec.target.url" in message


async def test_outside_the_cluster_a_plain_name_that_does_not_resolve_is_still_waited_for() -> None:
    problem = await OUTSIDE.url_problem("http://no-such-host.invalid:8000/")
    assert problem is not None and problem.reason == "TargetUnresolved" and problem.retry


@pytest.mark.usefixtures("without_cluster_dns")
async def test_in_the_cluster_an_unresolved_service_name_is_waited_for() -> None:
    """Nothing changes in the cluster: the Service may be new to cluster DNS."""
    problem = await TargetPolicy(in_cluster=True).url_problem("http://triton.ml.svc:8000")
    assert problem is not None and problem.reason == "TargetUnresolved" and problem.retry
    assert await TargetPolicy().unresolvable("triton.ml.svc") is None  # in the cluster by default


@pytest.mark.usefixtures("without_cluster_dns")
async def test_a_cluster_only_name_dialled_by_pods_is_left_to_them() -> None:
    """A benchmark's shards dial from inside the cluster: nothing to refuse or wait for."""
    assert await OUTSIDE.url_problem("http://triton.ml.svc:8000", by_pods=True) is None
    plain = await OUTSIDE.url_problem("http://no-such-host.invalid:8000/", by_pods=True)
    assert plain is not None and plain.reason == "TargetUnresolved"
    metadata = await OUTSIDE.url_problem("http://metadata.google.internal/", by_pods=True)
    assert metadata is not None and metadata.reason == "TargetNotAllowed"


async def test_a_cluster_only_name_that_resolves_here_is_judged_as_any_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A machine may be given the cluster's DNS: then the name is judged on its addresses."""

    async def resolve(host: str) -> list[str]:
        return {"triton.ml.svc": ["10.96.0.12"], "imds.ml.svc": ["169.254.169.254"]}.get(host, [])

    monkeypatch.setattr(policy, "_resolve", resolve)
    assert await OUTSIDE.url_problem("http://triton.ml.svc:8000") is None
    assert await OUTSIDE.unresolvable("triton.ml.svc") is None
    refused = await OUTSIDE.url_problem("http://imds.ml.svc:80")
    assert refused is not None and refused.reason == "TargetNotAllowed"


def test_where_the_operator_runs_is_read_with_the_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(settings, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-token")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("MCP_CLUSTER_DOMAIN", "corp.example")
    outside = TargetPolicy.from_env()
    assert not outside.in_cluster and outside.cluster_domain == "corp.example"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert TargetPolicy.from_env().in_cluster


def test_the_environment_may_be_unset_and_a_cidr_may_have_host_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_TARGET_ALLOW_CIDRS", raising=False)
    monkeypatch.delenv("MCP_TARGET_ALLOW_NAMESPACES", raising=False)
    bare = TargetPolicy.from_env()
    assert (bare.allow_cidrs, bare.allow_namespaces) == ((), frozenset())
    monkeypatch.setenv("MCP_TARGET_ALLOW_CIDRS", "10.1.2.3/8")
    assert TargetPolicy.from_env().allow_cidrs == (ipaddress.ip_network("10.0.0.0/8"),)


def test_a_resource_may_always_name_its_own_namespace_and_any_when_told() -> None:
    assert TargetPolicy().namespace_problem("ml", "ml") is None
    assert TargetPolicy(allow_namespaces=frozenset({"*"})).namespace_problem("ml", "shop") is None
    assert TargetPolicy().namespace_problem("ml", "shop") == (
        "serviceRef names namespace shop, but this resource is in ml; the operator allows other "
        "namespaces only when listed in MCP_TARGET_ALLOW_NAMESPACES"
    )


@pytest.mark.parametrize("host", ["metadata.google.internal.", "METADATA", "metadata."])
async def test_a_metadata_name_is_refused_in_any_spelling(host: str) -> None:
    assert TargetPolicy().address_problem(host, ["203.0.113.5"]) == f"{host} is a cloud metadata service"
    problem = await TargetPolicy().url_problem(f"http://{host}/computeMetadata/v1")
    assert problem is not None and problem.reason == "TargetNotAllowed"
    assert str(problem) == f"{host.lower()} is a cloud metadata service"  # as the URL parser reads it


def test_a_refused_address_is_named_with_the_host_it_was_reached_for() -> None:
    assert TargetPolicy().address_problem("imds.internal", ["10.0.0.1", "169.254.169.254"]) == (
        "imds.internal resolves to 169.254.169.254, a link-local or metadata address"
    )


async def test_a_url_without_a_host_is_refused_not_looked_up() -> None:
    problem = await TargetPolicy().url_problem("http:///health")
    assert problem is not None and (problem.reason, str(problem)) == (
        "TargetNotAllowed",
        "it names no host the target policy could check",
    )


async def test_a_name_no_resolver_can_encode_is_quoted_short() -> None:
    problem = await TargetPolicy().url_problem(f"http://{'h' * 2030}.invalid:1/")
    assert str(problem) == f"{'h' * 80} is not a host name a resolver can look up"


@pytest.mark.usefixtures("without_cluster_dns")
async def test_an_unresolvable_name_is_named_in_the_problem() -> None:
    problem = await OUTSIDE.url_problem("http://triton.ml.svc:8000/v2")
    assert str(problem).startswith("triton.ml.svc is a cluster Service name, which only the cluster's DNS")
    assert str(problem).endswith(
        "(for the target: spec.target.url); it is looked at again when the spec changes"
    )
    again = await OUTSIDE.unresolvable("triton.ml.svc")
    assert again is not None and str(again) == str(problem)


async def test_a_resolved_name_is_judged_on_every_address_it_resolves_to() -> None:
    """The real resolver: localhost is 127.0.0.1 (with an allow-list elsewhere, refused by name)."""
    strict = TargetPolicy(allow_cidrs=(ipaddress.ip_network("10.0.0.0/8"),))
    problem = await strict.url_problem("http://localhost:8000/health")
    assert problem is not None and problem.reason == "TargetNotAllowed"
    assert str(problem) == "localhost resolves to 127.0.0.1, outside MCP_TARGET_ALLOW_CIDRS"
    assert await TargetPolicy().url_problem("http://localhost:8000/health") is None


async def test_a_resolver_that_never_answers_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung lookup is a name that does not resolve now (looked at again), not a stuck handler."""

    async def never(*_: object, **__: object) -> list[Any]:
        await asyncio.Event().wait()
        return []

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", never)
    problem = await asyncio.wait_for(TargetPolicy().url_problem("http://slow.example:80/"), 10.0)
    assert problem is not None and problem.reason == "TargetUnresolved" and problem.retry


@pytest.mark.parametrize("url", ["[4E6F:eF3E2:dD]:04333", "http://[::1:g]/v1", "http://[1.2.3]:80"])
async def test_a_bracketed_host_that_is_no_address_is_refused_not_raised(url: str) -> None:
    """The CRD's url pattern admits any bracketed hex-and-colons host; urlsplit raises on one that
    is no IPv6 address, which failed the run with InternalError (a generated accepted spec)."""
    problem = await TargetPolicy().url_problem(url)
    assert problem is not None and problem.reason == "TargetNotAllowed" and "no host" in problem.message


@pytest.mark.usefixtures("without_cluster_dns")
async def test_a_cluster_name_with_an_empty_label_is_unresolvable_not_raised() -> None:
    """A serviceRef named "." made "..ns.svc", which the resolver refuses to encode (UnicodeError):
    the round failed on it every 60 s instead of saying TargetUnresolvable."""
    problem = await TargetPolicy(in_cluster=False).unresolvable("..ns.svc")
    assert problem is not None and problem.reason == "TargetUnresolvable"
