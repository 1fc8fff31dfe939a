"""Where a resource points, by where the operator runs: a ``serviceRef`` (``<name>.<ns>.svc``)
or a URL with a cluster-only host is ``TargetUnresolvable`` at once when the operator outside
the cluster would dial it, and left as it was in the cluster or when only pods dial it."""

from __future__ import annotations

import pytest

from mcp_operator.api.common import TargetRef
from mcp_operator.targets import SpecProblem, join_url, resolve_url
from mcp_operator.targets.policy import TargetPolicy

OUTSIDE, INSIDE = TargetPolicy(in_cluster=False), TargetPolicy(in_cluster=True)
TRITON = TargetRef.model_validate({"name": "triton", "port": 8000})
pytestmark = pytest.mark.usefixtures("without_cluster_dns")


async def _exists(namespace: str, name: str) -> bool:
    return (namespace, name) == ("ml", "triton")


async def test_a_service_ref_outside_the_cluster_is_unresolvable_at_once() -> None:
    got = await resolve_url(None, TRITON, "ml", _exists, OUTSIDE)
    assert isinstance(got, SpecProblem) and got.reason == "TargetUnresolvable"
    assert got.message.startswith("spec.target.serviceRef: triton.ml.svc is a cluster Service name")
    assert "run the operator in the cluster" in got.message and "spec.target.url" in got.message


async def test_a_service_ref_in_the_cluster_is_not_looked_up() -> None:
    assert await resolve_url(None, TRITON, "ml", _exists, INSIDE) == "http://triton.ml.svc:8000"


async def test_a_missing_service_is_not_found_before_it_is_unresolvable() -> None:
    got = await resolve_url(None, TargetRef.model_validate({"name": "gone"}), "ml", _exists, OUTSIDE)
    assert isinstance(got, SpecProblem) and got.reason == "TargetNotFound"


async def test_a_service_ref_dialled_by_pods_outside_the_cluster_is_their_url() -> None:
    got = await resolve_url(None, TRITON, "ml", _exists, OUTSIDE, by_pods=True)
    assert got == "http://triton.ml.svc:8000"


@pytest.mark.parametrize(
    ("policy", "url", "reason"),
    [
        (OUTSIDE, "http://triton.ml.svc:8000", "TargetUnresolvable"),
        (OUTSIDE, "http://triton.ml.svc.cluster.local:8000", "TargetUnresolvable"),
        (OUTSIDE, "http://no-such-host.invalid:8000", "TargetUnresolved"),  # not cluster-only
        (INSIDE, "http://triton.ml.svc:8000", "TargetUnresolved"),  # cluster DNS may be late
    ],
)
async def test_a_target_url_by_where_the_operator_runs(policy: TargetPolicy, url: str, reason: str) -> None:
    got = await resolve_url(url, None, "ml", _exists, policy)
    assert isinstance(got, SpecProblem) and got.reason == reason
    assert got.message.startswith("spec.target.url: ")


@pytest.mark.parametrize(
    ("base", "joined"),
    [
        ("http://h:8000", "http://h:8000/health"),
        ("http://h:8000/", "http://h:8000/health"),
        ("http://h:8000/v2", "http://h:8000/v2/health"),
        ("http://h:8000/v2?x=1", "http://h:8000/v2/health?x=1"),  # not after the query
        ("http://h:8000/v2#frag", "http://h:8000/v2/health#frag"),  # never after a fragment
    ],
)
def test_a_path_is_appended_to_the_urls_own_path(base: str, joined: str) -> None:
    assert join_url(base, "/health") == joined
