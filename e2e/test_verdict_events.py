"""A verdict and its event, written together or not at all (issue 37, item 1).

The verdict's status patch records the event it announces (``status.verdictEvent``); kopf posts
the event after the write. Here an operator judges a few gates and is stopped, and the events of
some gates are deleted: what an operator killed between the verdict's write and kopf's post
leaves. A new operator adopting the decided gates posts each lost event once, with the recorded
reason, message and time, gives no gate a second event, and evaluates no gate again.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from mcp_devcluster import stack
from mcp_operator.api.readiness import DECIDED_PHASES

GATES = [f"gate-{i}" for i in range(5)]
LOST = GATES[:3]  # their events are deleted: never posted by the operator that judged them


def _gate(name: str, url: str) -> str:
    probe = {"path": "/health", "requests": 20, "concurrency": 4, "minSuccessRatio": 0.9, "maxP99Ms": 1000}
    return stack.custom_resource(
        "MCPReadiness", name, {"target": {"url": url}, "checks": {"healthProbe": probe}}
    )


def _statuses(kube: Any) -> dict[str, dict[str, Any]]:
    items = json.loads(kube.run("get", "mcpreadiness", "-o", "json").stdout)["items"]
    return {i["metadata"]["name"]: {**(i.get("status") or {}), "uid": i["metadata"]["uid"]} for i in items}


def _judged(status: dict[str, Any]) -> bool:
    """Decided, with its event recorded, and no retry of its own due (a round of its own)."""
    return (
        status.get("phase") in DECIDED_PHASES
        and bool(status.get("verdictEvent"))
        and not (status.get("retry") or {}).get("nextAt")
    )


def _events(kube: Any) -> dict[str, list[dict[str, Any]]]:
    """The events of the namespace's gates, by gate."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in json.loads(kube.run("get", "events", "-o", "json").stdout)["items"]:
        involved = event["involvedObject"]
        if involved.get("kind") == "MCPReadiness":
            found[involved["name"]].append(event)
    return found


def _restored(op: stack.OperatorProcess) -> float:
    with urllib.request.urlopen(op.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("mcp_operator_verdict_events_restored_total ")]
    return float(line.split()[1])


def _resumed(op: stack.OperatorProcess, namespace: str) -> set[str]:
    """The gates of ``namespace`` whose resume kopf finished in ``op``."""
    return {
        str(record.get("name"))
        for record in op.log_records(namespace)
        if "Resuming is processed" in str(record.get("message"))
    }


def test_a_new_leader_posts_each_verdict_event_the_last_one_lost_once(
    kube: Any, refserver: str, operator: stack.OperatorProcess, tmp_path: Path
) -> None:
    stack.stop(operator.process)  # the shared one (the next test's fixture starts it again)
    tag = uuid.uuid4().hex[:6]
    first = stack.start_operator(kube.kubeconfig, tmp_path / "first", identity=f"judge-{tag}")
    try:
        kube.apply("---\n".join(_gate(name, refserver) for name in GATES))
        stack.until(
            lambda: len(s := _statuses(kube)) == len(GATES) and all(map(_judged, s.values())),
            "every gate judged, its event recorded",
            state=lambda: first.process.log_tail(2000),
        )
        stack.until(lambda: all(len(_events(kube)[n]) == 1 for n in GATES), "every verdict's event posted")
    finally:
        stack.stop(first.process)
    judged, posted = _statuses(kube), _events(kube)
    for name in GATES:
        (event,) = posted[name]
        record = judged[name]["verdictEvent"]
        assert (event["type"], event["reason"], event["message"]) == (
            record["type"],
            record["reason"],
            record["message"],
        )
    # what an operator killed between the verdict's write and kopf's post leaves: no event
    kube.run("delete", "event", *(posted[name][0]["metadata"]["name"] for name in LOST))
    assert all(_events(kube)[name] == [] for name in LOST)

    second = stack.start_operator(kube.kubeconfig, tmp_path / "second", identity=f"adopt-{tag}")
    try:
        stack.until(lambda: _resumed(second, kube.namespace) >= set(GATES), "every gate resumed")
        stack.until(lambda: _restored(second) == len(LOST), f"{len(LOST)} events restored")
        after, events = _statuses(kube), _events(kube)
    finally:
        stack.stop(second.process)
        print(f"logs: {first.process.log_path} {second.process.log_path}")

    for name in GATES:
        # not evaluated again: the same round, the same count
        assert after[name]["evaluation"]["id"] == judged[name]["evaluation"]["id"], name
        assert after[name]["evaluations"] == judged[name]["evaluations"], name
        (event,) = events[name]  # exactly one each
        record = judged[name]["verdictEvent"]
        assert (event["type"], event["reason"], event["message"]) == (
            record["type"],
            record["reason"],
            record["message"],
        )
        if name in LOST:  # posted again by the new leader, at the verdict's time
            assert event["firstTimestamp"] == event["lastTimestamp"] == record["time"], name
            assert event["metadata"]["name"].startswith(f"{name}.") and event["count"] == 1
            assert event["involvedObject"]["uid"] == judged[name]["uid"]
            assert event["source"]["component"] == "mcp-operator"
        else:  # kopf's own, untouched
            assert event["metadata"]["name"] == posted[name][0]["metadata"]["name"], name
