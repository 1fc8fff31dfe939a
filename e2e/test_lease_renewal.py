"""The leader's Lease is renewed while its event loop is busy (issue 37, item 1; the CI failure of
2026-12-06, where a restarted operator lost its lease 13 s after taking it).

A cold start with a backlog, or one long synchronous step, used to hold the event loop past the
renew deadline; the renewal waited behind it, the operator declared leadership lost and exited.
Here the operator's work blocks the loop for twice the renew deadline against a real API server:
the Lease must be renewed throughout, leadership must not be lost, and the Lease is given back
after.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from pathlib import Path
from typing import Any, NoReturn

import pytest
from kubernetes import client, config

from mcp_operator import kube, leadership
from mcp_operator.leadership.lease import LeaseConfig

BLOCKED_S = 4.0  # twice the renew deadline below


def _lease(kubeconfig: Path, name: str) -> dict[str, Any]:
    api = config.new_client_from_config(str(kubeconfig))
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(name, "default")
        return api.sanitize_for_serialization(lease)["spec"]
    finally:
        api.close()


def _micro(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_a_blocked_event_loop_keeps_its_lease(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "api_client", lambda: config.new_client_from_config(str(kubeconfig)))
    name = f"lease-{uuid.uuid4().hex[:8]}"  # not the session operator's Lease
    lease = LeaseConfig(
        name, "default", "blocked-leader", duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.5
    )
    lost: list[str] = []
    seen: dict[str, Any] = {}

    def on_lost(why: str) -> NoReturn:
        lost.append(why)
        raise SystemExit(1)  # ends the renewing thread, as the process's exit would

    async def operate() -> None:
        started = dt.datetime.now(dt.UTC)
        time.sleep(BLOCKED_S)  # the loop does nothing else for this long
        seen.update(started=started, spec=await asyncio.to_thread(_lease, kubeconfig, name))
        await asyncio.sleep(1.5)  # a holder on this loop would wake now, past its deadline

    led = leadership.run(lease, operate, liveness=None, on_lost=on_lost)
    asyncio.run(asyncio.wait_for(led, timeout=60))  # a standby that never leads fails here

    assert lost == [], f"leadership was lost while the loop was blocked: {lost}"
    renewed = _micro(seen["spec"]["renewTime"])
    assert seen["spec"]["holderIdentity"] == "blocked-leader"
    assert renewed - seen["started"] >= dt.timedelta(seconds=BLOCKED_S - 1.5), (
        f"last renewal {renewed} is not within the blocked stretch that began {seen['started']}"
    )
    assert not _lease(kubeconfig, name).get("holderIdentity"), "the Lease was not given back"
