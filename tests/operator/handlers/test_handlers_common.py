"""What both resources' handlers do alike when a spec names a host that does not resolve (yet):
no request, no refusal that stands for the generation (cluster DNS may be late), no verdict; Ready
False with ``TargetUnresolved`` naming the field, Accepted Unknown, one event, and kopf (a
benchmark) or the backlog (a gate's queued round) asked to look again. Once the name resolves,
the same generation runs. Called as kopf calls the handlers,
against the in-memory API of ``fakekube``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import kopf
import pytest
from tests.operator.fakekube import EventLog, FakeKube, custom_kind
from tests.operator.handlers.queued import evaluate_and_run

from mcp_operator.api.benchmark import KIND as BENCHMARK
from mcp_operator.api.benchmark import benchmark_status
from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import DECIDED_PHASES
from mcp_operator.api.readiness import KIND as READINESS
from mcp_operator.api.readiness import PLURAL as READINESS_PLURAL
from mcp_operator.benchmark import start
from mcp_operator.conditions import condition
from mcp_operator.handlers import benchmark as benchmark_handlers
from mcp_operator.handlers import common
from mcp_operator.handlers import readiness as readiness_handlers
from mcp_operator.readiness.backlog import Retry
from mcp_operator.targets import policy
from mcp_operator.targets.unresolved import RETRY_S
from mcp_refserver import RunningServer

NS = "serving"
Handler = Callable[..., Awaitable[None]]
LATE = "gate.late-dns.invalid"  # does not resolve here; the fake DNS below makes it resolve later


def _raw(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": 1},
        "spec": spec,
        "status": {},
    }


async def _call(handler: Any, stored: dict[str, Any] | None) -> dict[str, Any]:
    """One call as kopf makes it, with the object as the API server holds it."""
    assert stored is not None
    body = kopf.Body(cast(kopf.RawBody, stored))
    patch = kopf.Patch()
    await cast(Handler, handler)(spec=body.spec, status=body.status, meta=body.meta, body=body, patch=patch)
    return dict(dict(patch).get("status") or {})


async def _gate_round(kube: FakeKube, stored: dict[str, Any] | None) -> dict[str, Any]:
    """A gate's change handler and the round it queued; the status as the API server has it after."""
    assert stored is not None
    await evaluate_and_run(kopf.Body(cast(kopf.RawBody, stored)))
    meta = stored["metadata"]
    left = kube.get(custom_kind(GROUP, READINESS_PLURAL), meta["namespace"], meta["name"])
    return dict((left or {}).get("status") or {})


def _waiting(status: dict[str, Any], field: str) -> None:
    conditions = list(status.get("conditions") or [])
    ready, accepted = condition(conditions, "Ready") or {}, condition(conditions, "Accepted") or {}
    assert (ready["status"], ready["reason"]) == ("False", "TargetUnresolved"), ready
    assert (accepted["status"], accepted["reason"]) == ("Unknown", "TargetUnresolved"), accepted
    assert ready["message"].startswith(f"{field}: {LATE} does not resolve"), ready["message"]
    assert status.get("phase") != "Invalid" and "verdict" not in status  # no refusal, no pass


def _dns_answers(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    """Cluster DNS caught up: the late name now resolves (a fake: DNS is not ours to control)."""
    real = policy._resolve

    async def resolve(host: str) -> list[str]:
        return [address] if host == LATE else await real(host)

    monkeypatch.setattr(policy, "_resolve", resolve)


async def test_a_readiness_gate_waits_for_a_name_and_runs_once_it_resolves(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cr = custom_kind(GROUP, READINESS_PLURAL)
    spec = {
        "target": {"url": refserver.url},
        "checks": {
            "healthProbe": {"enabled": False},
            "xdsSync": {"sources": [{"kind": "syncz", "address": f"http://{LATE}:15014/debug/syncz"}]},
        },
    }
    stored = kube_fake.put(cr, _raw(READINESS, "late", spec))
    for _ in range(2):  # a retry says nothing new: one event
        with pytest.raises(Retry) as retry:
            await _gate_round(kube_fake, stored)
        assert retry.value.delay_s == RETRY_S
        stored = kube_fake.get(cr, NS, "late") or {}
        _waiting(stored["status"], "spec.checks.xdsSync.sources[0].address")
    assert [(e.type, e.reason) for e in posted_events.events] == [("Warning", "TargetUnresolved")]

    _dns_answers(monkeypatch, "127.0.0.1")  # resolves now: the same generation is evaluated
    status = await _gate_round(kube_fake, stored)
    assert status["phase"] in DECIDED_PHASES and status["observedGeneration"] == 1
    ready = condition(status["conditions"], "Ready") or {}
    assert ready["reason"] != "TargetUnresolved"


async def test_a_problem_that_stands_wins_over_a_name_that_does_not_resolve(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    cr = custom_kind(GROUP, READINESS_PLURAL)
    spec = {
        "target": {"url": "http://169.254.169.254/latest"},
        "checks": {"metricDrift": {"prometheusUrl": f"http://{LATE}:9090", "rules": [{"record": "r"}]}},
    }
    stored = kube_fake.put(cr, _raw(READINESS, "both", spec))
    status = await _gate_round(kube_fake, stored)
    ready = condition(status["conditions"], "Ready") or {}
    assert status["phase"] == "Invalid" and ready["reason"] == "TargetNotAllowed"
    assert LATE not in ready["message"]  # the refusal names only what stands


async def test_a_benchmark_waits_for_its_target_name_instead_of_a_refusal_that_stands(
    kube_fake: FakeKube, posted_events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused benchmark stays refused for its generation; an unresolved target must not be
    turned into such a refusal: once the name resolves, the same generation starts its Job."""
    cr = custom_kind(GROUP, "mcpbenchmarks")
    spec = {
        "target": {"url": f"http://{LATE}:8000", "path": "/health"},
        "load": {"concurrency": [1], "requests": 10},
        "preflight": "off",
    }
    stored = kube_fake.put(cr, _raw(BENCHMARK, "late-bench", spec))
    with pytest.raises(kopf.TemporaryError):
        await _call(benchmark_handlers.start_benchmark, stored)
    stored = kube_fake.get(cr, NS, "late-bench") or {}
    _waiting(stored["status"], "spec.target.url")
    assert not start.already_refused(benchmark_status(stored["status"]), 1)
    assert kube_fake.names("Job", NS) == []  # nothing started

    _dns_answers(monkeypatch, "10.96.0.20")
    started = await _call(benchmark_handlers.start_benchmark, stored)
    assert started["jobName"] and started["phase"] in ("Pending", "Running"), started


def _refused_at_once(status: dict[str, Any], field: str, host: str) -> None:
    conditions = list(status.get("conditions") or [])
    ready, accepted = condition(conditions, "Ready") or {}, condition(conditions, "Accepted") or {}
    assert (ready["status"], ready["reason"]) == ("False", "TargetUnresolvable"), ready
    assert (accepted["status"], accepted["reason"]) == ("False", "TargetUnresolvable"), accepted
    assert ready["message"].startswith(f"{field}: {host} is a cluster Service name"), ready["message"]
    assert "run the operator in the cluster" in ready["message"]
    assert status["phase"] == "Invalid" and status["verdict"] == "Error" and not status.get("checks")


@pytest.mark.usefixtures("outside_cluster")
@pytest.mark.parametrize(
    ("target", "field", "host"),
    [
        ({"serviceRef": {"name": "triton", "port": 8000}}, "spec.target.serviceRef", f"triton.{NS}.svc"),
        ({"url": f"http://triton.{NS}.svc:8000"}, "spec.target.url", f"triton.{NS}.svc"),
        (
            {"url": "http://triton.ml.svc.cluster.local:8000"},
            "spec.target.url",
            "triton.ml.svc.cluster.local",
        ),
    ],
)
async def test_outside_the_cluster_a_readiness_gate_of_a_service_name_is_unresolvable_at_once(
    kube_fake: FakeKube, posted_events: EventLog, target: dict[str, Any], field: str, host: str
) -> None:
    """The operator, run with a kubeconfig, probes the target itself and can never resolve a
    cluster Service name: Ready False ``TargetUnresolvable`` at once, no timer or retry (neither
    kopf's ``TemporaryError`` nor the queued round's ``Retry``), one event; a restart does not
    judge the generation again."""
    kube_fake.put("Service", {"metadata": {"name": "triton", "namespace": NS}, "spec": {}})
    cr = custom_kind(GROUP, READINESS_PLURAL)
    stored = kube_fake.put(cr, _raw(READINESS, "outside", {"target": target}))
    status = await _gate_round(kube_fake, stored)  # raises nothing: no retry
    _refused_at_once(status, field, host)
    assert [(e.type, e.reason) for e in posted_events.events] == [("Warning", "TargetUnresolvable")]
    assert await _gate_round(kube_fake, kube_fake.get(cr, NS, "outside")) == status
    assert len(posted_events.events) == 1  # judged once for its generation


@pytest.mark.parametrize(
    ("where", "url"),
    [
        ("inside_cluster", f"http://triton.{NS}.svc:8000"),  # in the cluster: unchanged
        ("outside_cluster", f"http://{LATE}:8000"),  # not a cluster-only name
    ],
)
async def test_a_name_that_may_still_resolve_is_waited_for_wherever_the_operator_runs(
    kube_fake: FakeKube, posted_events: EventLog, request: pytest.FixtureRequest, where: str, url: str
) -> None:
    request.getfixturevalue(where)
    cr = custom_kind(GROUP, READINESS_PLURAL)
    stored = kube_fake.put(cr, _raw(READINESS, "waits", {"target": {"url": url}}))
    with pytest.raises(Retry) as retry:
        await _gate_round(kube_fake, stored)
    assert retry.value.delay_s == RETRY_S
    ready = condition((kube_fake.get(cr, NS, "waits") or {})["status"]["conditions"], "Ready") or {}
    assert (ready["status"], ready["reason"]) == ("False", "TargetUnresolved"), ready
    assert [(e.type, e.reason) for e in posted_events.events] == [("Warning", "TargetUnresolved")]


@pytest.mark.usefixtures("outside_cluster")
async def test_outside_the_cluster_a_benchmark_of_a_service_name_is_left_to_its_shards(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    """A benchmark's shards dial from inside the cluster: the operator outside it neither refuses
    nor waits for a cluster Service name, and its preflight does not probe what it cannot resolve
    (a ``TargetUnreachable`` finding would only say where the operator runs)."""
    cr = custom_kind(GROUP, "mcpbenchmarks")
    spec = {
        "target": {"url": f"http://triton.{NS}.svc:8000", "path": "/health"},
        "load": {"concurrency": [1], "requests": 10},
        "preflight": "strict",
    }
    kube_fake.put(
        "Node", {"metadata": {"name": "node-0"}, "spec": {}, "status": {"allocatable": {"cpu": "8"}}}
    )
    stored = kube_fake.put(cr, _raw(BENCHMARK, "outside-bench", spec))
    started = await _call(benchmark_handlers.start_benchmark, stored)
    assert started["jobName"] and started["phase"] in ("Pending", "Running"), started
    assert started["targetUrl"] == f"http://triton.{NS}.svc:8000/health"
    assert not (started.get("preflight") or {}).get("findings"), started.get("preflight")
    assert "TargetUnreachable" not in [reason for _, reason in posted_events.reasons()]


def test_a_handler_names_its_object_for_the_logs_sync_or_async() -> None:
    """``about_object`` binds the body's object while a handler runs (kopf runs a sync handler
    in a thread with the context copied), keeps the handler's id, and unbinds it afterwards."""
    from kopf._core.intents.registries import get_callable_id

    from mcp_operator.handlers.common import about_object, current_object
    from mcp_operator.logs import ObjectRef

    seen: list[ObjectRef | None] = []

    @about_object
    def sync_handler(body: kopf.Body, **_: Any) -> None:
        seen.append(current_object())

    raw = _raw(READINESS, "named", {})
    sync_handler(body=kopf.Body(cast(kopf.RawBody, raw)))
    assert seen == [ObjectRef(NS, "named", READINESS)] and current_object() is None
    assert get_callable_id(sync_handler).endswith("<locals>.sync_handler")  # its own qualname
    assert get_callable_id(readiness_handlers.evaluate_readiness) == "evaluate_readiness"


async def test_a_handler_on_a_lapsed_lease_exits_before_it_acts(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a freeze the loop may hand out queued events before the renewing thread runs: the
    handler asks first and leaves as a crash would (``lifecycle.abandon``), its body never run."""
    acted: list[str] = []

    @common.about_object
    async def handler(**_: Any) -> None:
        acted.append("acted")

    def abandoned(why: str) -> None:
        raise SystemExit(why)

    monkeypatch.setattr(common, "abandon", abandoned)
    await handler(body={})
    assert acted == ["acted"]  # not leading under the Lease here: nothing lapses
    monkeypatch.setattr(common.leadership, "lapsed", lambda: "no renewal for 12 s")
    with pytest.raises(SystemExit, match="no renewal for 12 s"):
        await handler(body={})
    assert acted == ["acted"]
