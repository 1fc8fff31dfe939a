"""A cold start with a backlog (issue 37, item 1): many MCPReadiness applied while no operator
runs, then one operator started with a CPU hog beside it.

Before, 16 s into such a start the operator logged "leadership lost (no renewal for 10 s)" and
exited: its Lease was renewed by a task on the event loop that the backlog starved, leaving 813
of 1,000 gates Running with nobody to judge them. Now the renewal has a thread of its own and
the backlog is admitted a bounded number of rounds at a time (no more gates are ever seen
Running than are admitted): one leader throughout (the same process, one
Lease transition: the taking), every gate judged once (a retry of an operator-caused verdict is
a round of its own, as in ``test_readiness_many``), every verdict with its one event.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from mcp_devcluster import stack
from mcp_operator.api.readiness import DECIDED_PHASES

SIZES = [1000, pytest.param(5000, marks=pytest.mark.long)]
LEASE = ("default", "mcp-operator")  # the operator's defaults outside a pod
ADMITTED = 16  # MCP_MAX_ROUNDS_ADMITTED: rounds run at once; the rest wait, unclaimed


def _gate(name: str, url: str) -> str:
    probe = {"path": "/health", "requests": 100, "concurrency": 4, "minSuccessRatio": 0.99, "maxP99Ms": 1000}
    return stack.custom_resource(
        "MCPReadiness", name, {"target": {"url": url}, "checks": {"healthProbe": probe}}
    )


def _all(kube: Any) -> list[dict[str, Any]]:
    out = kube.run("get", "mcpreadiness", "-o", "json", timeout=300).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def _decided(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return (
        status.get("observedGeneration") == obj["metadata"]["generation"]
        and status.get("phase") in DECIDED_PHASES
        and not (status.get("retry") or {}).get("nextAt")
    )


def _lease(api: client.ApiClient) -> Any:
    return client.CoordinationV1Api(api).read_namespaced_lease(LEASE[1], LEASE[0]).spec


class LeaseWatch:
    """Every holder the Lease had while the test ran, read twice a second."""

    def __init__(self, api: client.ApiClient) -> None:
        self.holders: list[str] = []
        self._api = client.CoordinationV1Api(api)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.wait(0.5):
            try:
                spec = self._api.read_namespaced_lease(LEASE[1], LEASE[0]).spec
            except Exception:  # the API server is busy: look again
                continue
            holder = spec.holder_identity or ""
            if not self.holders or self.holders[-1] != holder:
                self.holders.append(holder)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def hog() -> Iterator[None]:
    """One core kept busy for the whole test."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("gates", SIZES)
def test_a_cold_start_with_a_backlog_keeps_its_lease_and_judges_each_gate_once(
    kube: Any, refserver: str, operator: Any, api: client.ApiClient, tmp_path: Path, hog: None, gates: int
) -> None:
    stack.stop(operator.process)  # gives the Lease back: the next operator takes it at once
    names = [f"cold-{i:04d}" for i in range(gates)]
    kube.run("apply", "-f", "-", input_text="---\n".join(_gate(n, refserver) for n in names), timeout=600)
    before = int(_lease(api).lease_transitions or 0)
    watch = LeaseWatch(api)
    started = time.monotonic()
    replacement = stack.start_operator(
        kube.kubeconfig, tmp_path, env={"MCP_MAX_ROUNDS_ADMITTED": str(ADMITTED)}
    )
    operator.process = replacement.process  # the session fixture stops whichever runs last
    operator.metrics_url = replacement.metrics_url
    most_running = 0  # claimed rounds seen at once
    try:
        deadline = started + 120 + 0.5 * gates
        while True:
            objs = _all(kube)
            running = sum(1 for o in objs if (o.get("status") or {}).get("phase") == "Running")
            most_running = max(most_running, running)
            if len(objs) == gates and all(_decided(o) for o in objs):
                break
            alive = replacement.process.exited() is None
            assert alive, f"the operator exited: {replacement.process.log_tail(3000)}"
            assert time.monotonic() < deadline, f"{sum(_decided(o) for o in objs)} of {gates} decided"
            time.sleep(2)
        elapsed = time.monotonic() - started
        time.sleep(3)  # a second round or a late event would show now
    finally:
        watch.close()
    log = replacement.process.log_path.read_text(errors="replace")
    assert "leadership lost" not in log, replacement.process.log_tail(3000)
    assert replacement.process.exited() is None, "the operator exited"
    lease = _lease(api)
    assert lease.holder_identity == replacement.identity
    assert int(lease.lease_transitions) == before + 1, (before, lease.lease_transitions)
    assert [h for h in watch.holders if h] == [replacement.identity], watch.holders
    assert 0 < most_running <= ADMITTED, f"{most_running} rounds claimed at once, {ADMITTED} admitted"

    by_name = {o["metadata"]["name"]: o for o in _all(kube)}
    verdicts = Counter(o["status"]["verdict"] for o in by_name.values())
    assert verdicts == Counter({"Pass": gates}), verdicts
    for name, obj in by_name.items():
        status = obj["status"]
        rounds = 1 + (status.get("retry") or {}).get("attempts", 0)  # a retry is a round of its own
        assert (status["evaluations"], len(status["history"])) == (rounds, rounds), (name, status)

    def verdict_events() -> Counter[str] | None:
        events = json.loads(kube.run("get", "events", "-o", "json", timeout=300).stdout)["items"]
        counted = Counter(
            e["involvedObject"]["name"]
            for e in events
            if e["reason"] == "Ready" and e["involvedObject"]["kind"] == "MCPReadiness"
        )
        return counted if set(names) <= set(counted) else None

    # each event follows its verdict's status write (kopf posts it from its own queue)
    ready_events = stack.until(verdict_events, "every gate has its verdict event", 120, interval_s=2)
    missing = [n for n in names if ready_events[n] != 1]
    assert missing == [], f"{len(missing)} gates without exactly one verdict event, e.g. {missing[:5]}"
    retried = sum(1 for o in by_name.values() if (o["status"].get("retry") or {}).get("attempts"))
    print(
        f"\ncold start with {gates} gates pending and a CPU hog: all judged {elapsed:.1f}s after the "
        f"operator started, {retried} retried for the operator's reasons, one leader, "
        f"{sum(ready_events.values())} verdict events, at most {most_running} rounds claimed at once"
    )
