"""What the operator did not expect is a verdict, not silence: a readiness round or a benchmark
start that raises is written as Error (``InternalError``) with Ready False and a Warning event,
once for its generation, instead of kopf retrying it every 60 s forever with the gate left
``Evaluating`` and the benchmark given no status at all.

The trigger is real: a URL whose port is above 65535, as an object admitted before the CRDs
refused it carries (``urllib.parse`` raises on it deep in the prober and the preflight)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import kopf
from tests.operator.fakekube import EventLog, FakeKube, custom_kind
from tests.operator.handlers.queued import evaluate_and_run

from mcp_operator.api import MCPBenchmarkStatus, MCPReadinessStatus
from mcp_operator.api.benchmark import KIND as BENCHMARK
from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND as READINESS
from mcp_operator.api.readiness import PLURAL
from mcp_operator.conditions import condition
from mcp_operator.handlers import benchmark, readiness

NS, NAME = "serving", "bad-port"
CR = custom_kind(GROUP, PLURAL)
BAD_PORT_URL = "http://127.0.0.1:99999"
Handler = Callable[..., Awaitable[None]]
recheck_readiness = cast(Handler, readiness.recheck_readiness)
start_benchmark = cast(Handler, benchmark.start_benchmark)


def _raw(kind: str, spec: dict[str, Any], status: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    meta = {"name": NAME, "namespace": NS, "uid": "0b5e1d2c", "generation": generation}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec, "status": status}


def _ready(status: dict[str, Any]) -> tuple[str, str, str]:
    found = condition(list(status.get("conditions") or []), "Ready")
    assert found is not None, status
    return found["status"], found["reason"], found["message"]


def _gate_spec(**overrides: Any) -> dict[str, Any]:
    probe = {"requests": 20, "concurrency": 4, "minSuccessRatio": 0.9}
    return {"target": {"url": BAD_PORT_URL}, "checks": {"healthProbe": probe}, **overrides}


async def _evaluate(kube: FakeKube, spec: dict[str, Any], status: dict[str, Any] | None = None) -> None:
    await evaluate_and_run(kopf.Body(cast(kopf.RawBody, kube.put(CR, _raw(READINESS, spec, status or {})))))


def _stored(kube: FakeKube) -> dict[str, Any]:
    obj = kube.get(CR, NS, NAME)
    assert obj is not None
    return dict(obj.get("status") or {})


async def test_a_round_that_raises_is_an_error_verdict_with_an_event_once(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    await _evaluate(kube_fake, _gate_spec())  # no exception reaches the backlog: nothing to retry
    status = _stored(kube_fake)
    assert (status["phase"], status["verdict"], status["observedGeneration"]) == ("Failed", "Error", 1)
    ready, reason, message = _ready(status)
    assert (ready, reason) == ("False", "InternalError")
    assert "ValueError" in message and "65535" in message
    (row,) = status["checks"]
    assert (row["name"], row["verdict"], row["reason"]) == ("round", "Error", "InternalError")
    assert status["evaluations"] == 1
    MCPReadinessStatus.model_validate(status)
    (event,) = posted_events.events
    assert (event.type, event.reason) == ("Warning", "InternalError")
    assert "ValueError" in event.message
    # kopf hands the handler the same generation again (a resume): decided, not run again
    await _evaluate(kube_fake, _gate_spec(), status)
    assert _stored(kube_fake) == status and len(posted_events.events) == 1


async def test_a_recheck_that_raises_is_an_error_verdict_too(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    """A standing gate whose recheck raises turns not Ready, with an event (Ready changed), and
    keeps its interval: the timer is not a retry loop either."""
    spec = _gate_spec(recheckIntervalSeconds=60)
    passed = {
        "observedGeneration": 1,
        "phase": "Succeeded",
        "verdict": "Pass",
        "completedAt": "2020-01-01T00:00:00Z",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "ChecksPassed",
                "lastTransitionTime": "2020-01-01T00:00:00Z",
            }
        ],
    }
    body = kopf.Body(cast(kopf.RawBody, kube_fake.put(CR, _raw(READINESS, spec, passed))))
    await recheck_readiness(spec=body.spec, meta=body.meta, body=body)
    status = _stored(kube_fake)
    assert (status["phase"], status["verdict"]) == ("Failed", "Error")
    assert _ready(status)[:2] == ("False", "InternalError")
    assert status["completedAt"] != passed["completedAt"]  # the next recheck counts from now
    assert posted_events.reasons() == [("Warning", "InternalError")]


def _bench_spec(**overrides: Any) -> dict[str, Any]:
    load = {"concurrency": [1], "requests": 5, "requestTimeoutSeconds": 5}
    return {"target": {"url": BAD_PORT_URL}, "load": load, "shards": 1, "preflight": "warn", **overrides}


async def _start(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body = kopf.Body(cast(kopf.RawBody, _raw(BENCHMARK, spec, status or {})))
    patch = kopf.Patch()
    await start_benchmark(spec=body.spec, status=body.status, meta=body.meta, body=body, patch=patch)
    return dict(dict(patch).get("status") or {})


async def test_a_benchmark_start_that_raises_ends_the_run_with_an_event_once(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    status = await _start(_bench_spec())
    assert (status["phase"], status["verdict"], status["observedGeneration"]) == ("Failed", "Error", 1)
    ready, reason, message = _ready(status)
    assert (ready, reason) == ("False", "InternalError") and "ValueError" in message
    failed = condition(status["conditions"], "Failed")
    assert failed is not None and failed["status"] == "True"  # kubectl wait --for=condition=Failed returns
    MCPBenchmarkStatus.model_validate(status)
    assert posted_events.reasons() == [("Warning", "InternalError")]
    assert kube_fake.calls_to("create") == []  # no child of a run that did not start
    # a resume of the same generation: the end stands, no second event
    assert await _start(_bench_spec(), status) == {}
    assert len(posted_events.events) == 1
