"""Client retries against a real loopback server: a 503 is retried as the policy says, the
server sees every attempt, a request is measured from its first attempt, and the run's notes
count the attempts."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mcp_bench.engines import run_plan
from mcp_bench.plan import PlanError, Retry, RunPlan
from mcp_bench.protocols.retry import backoff_s
from mcp_refserver import RefServerConfig, start_refserver


def _plan(url: str, retry: dict[str, Any] | None, **kw: Any) -> RunPlan:
    data: dict[str, Any] = {
        "url": url,
        "levels": {"concurrency": [2]},
        "stage": {"requests": 10},
        **({"retry": retry} if retry is not None else {}),
    }
    data.update(kw)
    return RunPlan.from_dict(data)


async def test_a_503_is_retried_without_backoff_and_the_server_sees_every_attempt(loopback_http) -> None:  # type: ignore[no-untyped-def]
    before = loopback_http.hits["status"]
    doc = await run_plan(_plan(loopback_http.url + "/status/503", {"attempts": 4}))
    (level,) = doc.levels
    assert level.failed == 10 and level.completed == 0  # the last attempt's answer is the request's
    assert loopback_http.hits["status"] - before == 40 + 1  # and the fingerprint probe
    assert "retries: 40 attempts for 10 requests (up to 4 each, no backoff)" in doc.notes


async def test_a_status_outside_the_policy_is_not_retried(loopback_http) -> None:  # type: ignore[no-untyped-def]
    before = loopback_http.hits["status"]
    await run_plan(_plan(loopback_http.url + "/status/500", {"attempts": 4}))
    assert loopback_http.hits["status"] - before == 10 + 1


async def test_a_shed_request_waits_its_backoff_and_is_measured_from_its_first_attempt() -> None:
    """The reference server holds one request at a time and sheds the other with 503: that one
    succeeds on its retry after the backoff, and its latency covers both attempts."""
    config = RefServerConfig(max_inflight=1)
    async with await start_refserver(config) as srv:
        plan = _plan(
            srv.url + "/delay?ms=50",
            {"attempts": 5, "backoff_ms": 60},
            levels={"concurrency": [2]},
            stage={"requests": 6},
        )
        doc = await run_plan(plan)
    (level,) = doc.levels
    assert level.completed == 6 and level.failed == 0
    e2e = level.latency["e2e"]
    assert e2e.max_ms is not None and e2e.max_ms >= 60 + 50  # the shed attempt, the wait, the retry
    (note,) = [n for n in doc.notes if n.startswith("retries:")]
    assert "for 6 requests (up to 5 each, backoff 60 ms)" in note


def test_jitter_draws_below_the_exponential_ceiling() -> None:
    policy = Retry(attempts=5, backoff_ms=100, max_backoff_ms=300, jitter=True)
    rng = random.Random(1)
    draws = [backoff_s(policy, retry, rng) for retry in range(4) for _ in range(50)]
    assert all(0 <= d <= 0.3 for d in draws) and len(set(draws)) > 100
    fixed = Retry(attempts=5, backoff_ms=100, max_backoff_ms=300)
    assert [backoff_s(fixed, r, rng) for r in range(4)] == [0.1, 0.2, 0.3, 0.3]


def test_external_engines_refuse_a_retry_policy() -> None:
    from mcp_bench.engines.external import reject_unsupported

    with pytest.raises(PlanError, match="retry: not applied by the locust engine"):
        reject_unsupported("locust", _plan("http://127.0.0.1:1/x", {"attempts": 2}), ["http"])
