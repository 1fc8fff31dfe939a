"""Kubernetes API calls: transient failures are retried a few times, briefly; the rest raise at
once for the handler's own error path."""

from __future__ import annotations

import time

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from tests.operator.fakekube import FakeKube

from mcp_operator import kube


def _flaky(failures: list[BaseException]):  # type: ignore[no-untyped-def]
    calls: list[float] = []

    def fn(**_: object) -> str:
        calls.append(time.monotonic())
        if failures:
            raise failures.pop(0)
        return "ok"

    return fn, calls


async def test_a_503_then_success_costs_a_fraction_of_a_second() -> None:
    fn, calls = _flaky([ApiException(status=503), ApiException(status=429)])
    started = time.monotonic()
    assert await kube.call(fn) == "ok"
    assert len(calls) == 3 and time.monotonic() - started < 2.0


async def test_connection_errors_are_retried_too() -> None:
    fn, calls = _flaky([urllib3.exceptions.ProtocolError("connection reset")])
    assert await kube.call(fn) == "ok" and len(calls) == 2


@pytest.mark.parametrize("status", [400, 403, 404, 409, 422])
async def test_answers_that_mean_something_are_not_retried(status: int) -> None:
    fn, calls = _flaky([ApiException(status=status)])
    with pytest.raises(ApiException):
        await kube.call(fn)
    assert len(calls) == 1


async def test_retries_are_bounded() -> None:
    fn, calls = _flaky([ApiException(status=503) for _ in range(10)])
    with pytest.raises(ApiException):
        await kube.call(fn)
    assert len(calls) == 1 + len(kube.RETRY_DELAYS_S)


def test_retry_after_is_honoured_up_to_a_limit() -> None:
    throttled = ApiException(status=429)
    throttled.headers = {"Retry-After": "1"}
    assert kube.retry_delay(throttled, 0) == 1.0
    throttled.headers = {"Retry-After": "120"}
    assert kube.retry_delay(throttled, 0) == kube.MAX_RETRY_AFTER_S


def test_a_shard_write_outlives_an_api_server_outage() -> None:
    """The uncaught MaxRetryError of a restarting API server lost measured results: now every
    transient failure is retried, with a growing backoff, until the call lands."""
    outage = [urllib3.exceptions.MaxRetryError(None, "/api", "connection refused") for _ in range(2)]
    fn, calls = _flaky([*outage, ApiException(status=503)])
    assert kube.call_within(fn, within_s=60) == "ok"
    assert len(calls) == 4
    assert calls[-1] - calls[0] >= 0.2 + 0.4 + 0.8  # it backs off (a sleep is never shorter)


@pytest.mark.parametrize("status", [404, 413, 422])
def test_a_shard_write_refused_for_a_reason_is_not_retried(status: int) -> None:
    fn, calls = _flaky([ApiException(status=status)])
    with pytest.raises(ApiException):
        kube.call_within(fn, within_s=60)
    assert len(calls) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_from_an_api_server_that_just_restarted_is_retried_a_while(status: int) -> None:
    """A restarted API server answers a service account 401/403 until its caches have synced: the
    shard's result write tries again for a while, and a refusal that lasts is raised."""
    fn, calls = _flaky([ApiException(status=status), ApiException(status=status)])
    assert kube.call_within(fn, within_s=60) == "ok" and len(calls) == 3
    lasting, tries = _flaky([ApiException(status=status) for _ in range(100)])
    with pytest.raises(ApiException):
        kube.call_within(lasting, within_s=60, auth_retry_s=0.5)
    assert 2 <= len(tries) < 100


def test_a_shard_write_gives_up_at_its_deadline() -> None:
    fn, calls = _flaky([ConnectionRefusedError() for _ in range(100)])
    with pytest.raises(ConnectionRefusedError):
        kube.call_within(fn, within_s=1.0)
    assert 2 <= len(calls) < 100  # tried again within the second, then stopped


@pytest.mark.parametrize(("status", "exists"), [(404, False), (400, False)])
async def test_a_service_name_no_object_can_have_names_no_service(
    kube_fake: FakeKube, status: int, exists: bool
) -> None:
    """A serviceRef's name is free text in the CRD; the API server answers 400 to a GET of one no
    object can have ("may not contain '%'"), which failed a benchmark's start with InternalError."""
    kube_fake.refuse("read", "Service", status)
    assert await kube.service_exists("ns", "%bad") is exists


@pytest.mark.parametrize(("namespace", "name"), [("ns", "."), ("ns", ".."), ("ns", "Web"), ("..", "web")])
async def test_a_name_no_service_can_have_is_not_even_asked_for(
    kube_fake: FakeKube, namespace: str, name: str
) -> None:
    """A GET of "." or ".." reads the collection (or the namespace) and answers 200: a serviceRef
    named "." passed as an existing Service, whose "..ns.svc" then broke the resolver."""
    # as the real API server answers such a GET: with something, not a 404
    kube_fake.put("Service", {"metadata": {"name": name, "namespace": namespace}, "spec": {}})
    assert await kube.service_exists(namespace, name) is False
