"""The suite that builds checks from ``spec.checks``: proxies named by a Service's selector,
checks that overrun or raise become rows, and usage errors before anything runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from mcp_checks.health import HealthProbeSpec
from mcp_checks.specs import XdsProxies
from mcp_checks.suite import CheckContext, PlannedCheck, SpecError, _pods_to_proxies, plan_checks, run_checks
from mcp_checks.verdict import CheckOutcome, Verdict


class FakeCore:
    """Just the two reads the proxy lookup makes."""

    def __init__(self, selector: dict[str, str] | None) -> None:
        self.selector = selector
        self.asked: list[str] = []

    def read_namespaced_service(self, name: str, namespace: str) -> Any:
        return SimpleNamespace(spec=SimpleNamespace(selector=self.selector))

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        self.asked.append(label_selector)
        pods = [
            client.V1Pod(
                metadata=client.V1ObjectMeta(name=n),
                status=client.V1PodStatus(
                    phase=phase,
                    pod_ip=f"10.0.0.{i}",
                    conditions=[client.V1PodCondition(type="Ready", status=ready)] if ready else None,
                ),
            )
            for i, (n, phase, ready) in enumerate(
                [
                    ("srv-a", "Running", "True"),
                    ("srv-b", "Running", "True"),
                    ("srv-c", "Pending", "False"),
                    ("srv-d", "Running", "False"),  # starting, or failing its readiness probe
                    ("srv-e", "Running", None),  # no conditions yet
                ]
            )
        ]
        return SimpleNamespace(items=pods)


async def test_proxies_from_a_service_selector(monkeypatch: pytest.MonkeyPatch) -> None:
    core = FakeCore({"app": "srv", "tier": "edge"})
    monkeypatch.setattr("mcp_checks.suite.client.CoreV1Api", lambda _api: core)
    ctx = CheckContext("ml", api_client=client.ApiClient())  # serialises the models; never dialled
    ids = await _pods_to_proxies(
        ctx, XdsProxies.model_validate({"service": "srv", "nodeIdTemplate": "sidecar~{ip}~{pod}.{namespace}"})
    )
    assert ids == ("sidecar~10.0.0.0~srv-a.ml", "sidecar~10.0.0.1~srv-b.ml")  # ready pods only
    assert core.asked == ["app=srv,tier=edge"]
    monkeypatch.setattr("mcp_checks.suite.client.CoreV1Api", lambda _api: FakeCore({}))
    with pytest.raises(SpecError, match="has no selector"):
        await _pods_to_proxies(ctx, XdsProxies(service="headless"))
    assert await _pods_to_proxies(ctx, XdsProxies()) is None  # every proxy the sources know
    assert await _pods_to_proxies(ctx, XdsProxies(ids=["a"])) == ("a",)


async def test_a_check_that_overruns_or_raises_is_a_row() -> None:
    async def slow(_: CheckContext) -> CheckOutcome:
        await asyncio.sleep(5)
        raise AssertionError("not reached")

    async def broken(_: CheckContext) -> CheckOutcome:
        raise RuntimeError("source answered nonsense")

    rows = await run_checks(
        [PlannedCheck("slow", 0.05, slow), PlannedCheck("broken", 1.0, broken)], CheckContext("ns")
    )
    assert [(r.name, r.outcome, r.reason) for r in rows] == [
        ("slow", Verdict.INCONCLUSIVE, "CheckTimedOut"),
        ("broken", Verdict.ERROR, "CheckFailed"),
    ]
    assert all(r.duration_s is not None for r in rows)


def test_usage_errors_before_anything_runs() -> None:
    with pytest.raises(SpecError, match="unknown check"):
        plan_checks({"nope": {}})
    with pytest.raises(SpecError, match=r"workload\.name"):
        plan_checks({"configConsistency": {"workload": {"kind": "Deployment"}, "configMaps": ["c"]}})
    with pytest.raises(SpecError, match="metricDrift"):
        plan_checks({"metricDrift": {"rules": []}})
    assert [c.name for c in plan_checks({"healthProbe": {"enabled": False}})] == []


async def test_waiting_for_capacity_is_queue_time_not_the_checks_timeout() -> None:
    """One probe slot, held past the health probe's whole timeout by another gate's round:
    the queued probe runs once the slot frees, within its own timeout, and reports its own
    duration, never CheckTimedOut for the operator's queue."""
    slot = asyncio.Semaphore(1)
    urls: list[str] = []

    @contextlib.asynccontextmanager
    async def probe_slot(url: str) -> AsyncIterator[None]:
        urls.append(url)
        async with slot:
            yield

    async def health_probe(spec: HealthProbeSpec) -> CheckOutcome:
        await asyncio.sleep(0.01)
        return CheckOutcome("health-probe", Verdict.PASS, "HealthProbePassed", spec.url)

    (check,) = plan_checks({"healthProbe": {"requests": 1, "timeoutMs": 20}})
    assert check.timeout_s < 5.1  # 2 x 20 ms plus the suite's slack
    ctx = CheckContext("ns", "http://svc:8000", health_probe=health_probe, probe_slot=probe_slot)
    await slot.acquire()  # another gate's round
    queued = asyncio.create_task(run_checks([check], ctx))
    await asyncio.sleep(check.timeout_s * 1.2)
    assert not queued.done()
    slot.release()
    (row,) = await queued
    assert (row.outcome, row.reason, row.message) == (
        Verdict.PASS,
        "HealthProbePassed",
        "http://svc:8000/health",
    )
    assert row.duration_s is not None and row.duration_s < check.timeout_s
    assert urls == ["http://svc:8000/health"]


def test_the_probe_path_goes_into_the_targets_path_not_after_its_fragment() -> None:
    from mcp_checks.suite import _join

    assert _join("http://h:8000/v2#frag", "/health") == "http://h:8000/v2/health#frag"
    assert _join("http://h:8000/?q=1", "/health") == "http://h:8000/health?q=1"
