"""Fixtures for operator unit tests: the project's reference server on 127.0.0.1 (no cluster),
an in-memory Kubernetes API with an event log for the handler tests (see ``fakekube``), and
cluster DNS for the in-cluster names specs use (``cluster_dns``), and where the operator runs
(``outside_cluster``, ``inside_cluster``), for the tests that need cluster DNS absent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import kopf
import pytest
from tests.operator.fakekube import EventLog, FakeKube

from mcp_operator import kube, settings
from mcp_operator.targets import policy
from mcp_refserver import RunningServer, start_refserver


@pytest.fixture
async def refserver() -> AsyncIterator[RunningServer]:
    """Plain HTTP ``/delay?ms=N`` answers after N ms; ``/health`` answers 200 at once."""
    async with await start_refserver() as server:
        yield server


@pytest.fixture
def kube_fake(monkeypatch: pytest.MonkeyPatch, posted_events: EventLog) -> FakeKube:
    """``mcp_operator.kube``'s API accessors answer from an in-memory store, and ``api_client()``
    is a stub that fails on use, so nothing reaches for a real cluster. Events are recorded too
    (``posted_events``): handlers post them as they go."""
    fake = FakeKube()
    monkeypatch.setattr(kube, "core", lambda: fake.core)
    monkeypatch.setattr(kube, "thin_core", lambda: fake.core)  # the same calls, the same names
    monkeypatch.setattr(kube, "batch", lambda: fake.batch)
    monkeypatch.setattr(kube, "rbac", lambda: fake.rbac)
    monkeypatch.setattr(kube, "custom", lambda: fake.custom)
    monkeypatch.setattr(kube, "authz", lambda: fake.authz)
    monkeypatch.setattr(kube, "api_client", lambda: fake.api_client)
    # the fake's 401/403 is final, never an API server still syncing its RBAC: a minute of retries
    # would only make the refusal tests slow (tests/operator/test_operator_kube.py covers the wait)
    monkeypatch.setattr(kube, "STARTUP_AUTH_S", 0.5)
    return fake


@pytest.fixture
def posted_events(monkeypatch: pytest.MonkeyPatch) -> EventLog:
    """Events our handlers post, recorded at ``kopf.event`` (posting needs a running operator):
    ``mcp_operator.events.normal``/``warning`` run as they do in the operator, type and all."""
    log = EventLog()
    monkeypatch.setattr(kopf, "event", log.post)
    return log


CLUSTER_IP = "10.96.0.10"


@pytest.fixture(autouse=True)
def cluster_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a cluster, ``infer.perf.svc`` or a bare Service name resolves (cluster DNS); here it
    does not, and the target policy does not dial a name it cannot resolve. DNS cannot be
    controlled here, so the policy's admission lookup answers a ClusterIP for such names, as
    cluster DNS would; any other name goes to the real resolver (``*.invalid`` stays unresolved)."""
    real = policy._resolve

    async def resolve(host: str) -> list[str]:
        name = host.lower().rstrip(".")
        in_cluster = name.endswith((".svc", ".svc.cluster.local")) or (name and "." not in name)
        return [CLUSTER_IP] if in_cluster and name != "localhost" else await real(host)

    monkeypatch.setattr(policy, "_resolve", resolve)


@pytest.fixture
def without_cluster_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo ``cluster_dns``: the cluster's own names (``*.svc``, ``*.svc.cluster.local``) do not
    resolve, as on a developer's machine; any other name goes to the real resolver."""
    real = policy._resolve

    async def resolve(host: str) -> list[str]:
        return [] if policy.TargetPolicy().cluster_only(host) else await real(host)

    monkeypatch.setattr(policy, "_resolve", resolve)


@pytest.fixture
def outside_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, without_cluster_dns: None) -> None:
    """The operator runs outside the cluster (``mcp-operator run`` with a kubeconfig): neither
    ``KUBERNETES_SERVICE_HOST`` nor a service account token, and no cluster DNS."""
    monkeypatch.delenv(settings.SERVICE_HOST_ENV, raising=False)
    monkeypatch.setattr(settings, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-token")


@pytest.fixture
def inside_cluster(monkeypatch: pytest.MonkeyPatch, without_cluster_dns: None) -> None:
    """The operator runs in a pod (the kubelet sets ``KUBERNETES_SERVICE_HOST``), and cluster DNS
    does not know the names yet (a Service just created)."""
    monkeypatch.setenv(settings.SERVICE_HOST_ENV, "10.96.0.1")
