"""The ``cluster`` fixture: ``faultcluster.Cluster`` over a fresh in-memory API, which
``mcp_operator.readiness.faults`` reaches instead of a real ApiClient."""

from __future__ import annotations

import pytest
from tests.operator.fakekube import FakeKube
from tests.operator.readiness.faults.faultcluster import NS, OTHER_NS, Cluster

from mcp_operator.readiness.faults import base


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """Namespace ``ml`` opted in, ``other`` not; zone-a has node-a1 and node-a2, zone-b node-b1;
    pods srv-0..2 of ``ml`` on node-a1, node-a2, node-b1."""
    fake = FakeKube()
    monkeypatch.setattr(base, "apis", lambda api: base.Apis(fake.core, fake.apps, fake.policy, fake.authz))
    c = Cluster(fake)
    c.namespace(NS)
    c.namespace(OTHER_NS, opted_in=False)
    c.node("node-a1", "zone-a")
    c.node("node-a2", "zone-a")
    c.node("node-b1", "zone-b")
    for i, node in enumerate(["node-a1", "node-a2", "node-b1"]):
        c.pod(f"srv-{i}", node=node)
    return c
