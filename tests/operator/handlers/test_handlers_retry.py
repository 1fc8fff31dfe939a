"""A gate whose verdict was the operator's own doing is evaluated again by the retry timer, with
a bounded backoff counted in ``status.retry`` (``readiness.retry``); before, it stayed Ready=False
until someone edited its spec.

The overload is real: the round's prober measures its own loop lag against a limit set so low
(``maxProberLagMs``) that any lateness exceeds it, so a round whose figures break a limit is
``Inconclusive ProberOverloaded`` (its figures may be the prober's), as on an overloaded host."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any, cast

import kopf
from tests.operator.fakekube import EventLog, FakeKube, custom_kind
from tests.operator.handlers.queued import evaluate_and_run

from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL
from mcp_operator.conditions import condition
from mcp_operator.handlers import readiness as handlers
from mcp_refserver import RunningServer

NS, NAME = "serving", "busy-gate"
CR = custom_kind(GROUP, PLURAL)
Handler = Callable[..., Awaitable[None]]
retry_readiness = cast(Handler, handlers.retry_readiness)
PAST = "2020-01-01T00:00:00Z"


def _spec(url: str) -> dict[str, Any]:
    # 50 ms answers against a 5 ms P99 limit would Fail; with a lag limit no prober meets, the
    # round is no evidence of that: ProberOverloaded, the operator's own doing
    probe = {
        "path": "/delay?ms=50",
        "requests": 20,
        "concurrency": 4,
        "minSuccessRatio": 0.9,
        "maxP99Ms": 5,
        "maxProberLagMs": 0.001,
    }
    return {"target": {"url": url}, "checks": {"healthProbe": probe}}


def _body(stored: dict[str, Any]) -> kopf.Body:
    return kopf.Body(cast(kopf.RawBody, {**stored, "metadata": {**stored["metadata"]}}))


def _put(kube: FakeKube, spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": NAME, "namespace": NS, "uid": "9f1e2d3c", "generation": 1}
    raw = {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec, "status": status}
    return kube.put(CR, raw)


def _stored(kube: FakeKube) -> dict[str, Any]:
    obj = kube.get(CR, NS, NAME)
    assert obj is not None
    return copy.deepcopy(dict(obj.get("status") or {}))


async def _retry(kube: FakeKube, spec: dict[str, Any], status: dict[str, Any]) -> None:
    body = _body(_put(kube, spec, status))
    await retry_readiness(spec=body.spec, meta=body.meta, body=body)


def _seconds_ahead(stamp: str) -> float:
    at = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return (at - dt.datetime.now(dt.UTC)).total_seconds()


async def test_an_operator_caused_verdict_is_retried_with_backoff_until_the_bound(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    spec = _spec(refserver.url)
    await evaluate_and_run(_body(_put(kube_fake, spec, {})))
    first = _stored(kube_fake)
    ready = condition(first["conditions"], "Ready") or {}
    assert (first["verdict"], ready.get("status"), ready.get("reason")) == (
        "Inconclusive",
        "False",
        "ProberOverloaded",
    ), first["checks"]
    retry = first["retry"]
    assert (retry["attempts"], retry["reason"]) == (0, "ProberOverloaded")
    assert 0 < _seconds_ahead(retry["nextAt"]) <= 6  # 5 s from the verdict
    assert posted_events.reasons() == [("Warning", "ProberOverloaded")]

    # not due yet: the timer's tick leaves the gate alone
    await _retry(kube_fake, spec, first)
    assert _stored(kube_fake) == first

    # due: evaluated again as a recheck (Ready stays as it was: no event), the backoff doubles
    await _retry(kube_fake, spec, {**first, "retry": {**retry, "nextAt": PAST}})
    second = _stored(kube_fake)
    assert second["evaluations"] == 2 and second["history"][-1]["trigger"] == "Recheck"
    assert (second["retry"]["attempts"], second["retry"]["reason"]) == (1, "ProberOverloaded")
    assert 5 < _seconds_ahead(second["retry"]["nextAt"]) <= 11
    assert len(posted_events.events) == 1

    # the fifth retry is the last: its verdict stands, with the count kept
    last = {"attempts": 4, "nextAt": PAST, "reason": "ProberOverloaded"}
    await _retry(kube_fake, spec, {**second, "retry": last})
    final = _stored(kube_fake)
    assert final["retry"] == {"attempts": 5, "reason": "ProberOverloaded"}
    assert final["verdict"] == "Inconclusive" and final["evaluations"] == 3
    await _retry(kube_fake, spec, final)  # nothing due: nothing runs
    assert _stored(kube_fake) == final
