"""The operator's own process: JSON log lines that name the object they are about, and SIGTERM
as a pod's deletion sends it. Mid-drill and mid-probe-round, the operator stops the drill (which
reverts its fault), ends its worker processes and exits well inside the Deployment's grace
period; the next operator ends the drill DrillInterrupted."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_devcluster import stack

OPT_IN = "mcp2026.io/fault-injection=enabled"
SHUTDOWN_TIMEOUT_S = 45  # MCP_SHUTDOWN_TIMEOUT_SECONDS in the manifests; the pod gets 60


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers: a probe round against it stays
    in its worker process until every request times out."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()


def _children(pid: int) -> dict[int, str]:
    """This process's children by pid, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found[int(entry.name)] = cmdline
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _replicas(kube: Any) -> int:
    return int(kube.get("deployment", "srv")["spec"]["replicas"])


def _faults(kube: Any, name: str) -> list[dict[str, Any]]:
    return list((kube.get("mcpreadiness", name).get("status") or {}).get("faults") or [])


def test_sigterm_reverts_the_drill_ends_the_workers_and_exits_in_time(
    kube: Any, refserver: str, operator: Any, tmp_path: Path, sample: Any, silent_server: str
) -> None:
    # an operator of this test's own, so that its whole log is this test's
    stack.stop(operator.process)
    mine = stack.start_operator(kube.kubeconfig, tmp_path)
    operator.process, operator.metrics_url = mine.process, mine.metrics_url
    popen = mine.process.popen
    assert popen is not None

    def state() -> str:
        return f"operator log:\n{mine.process.log_tail(4000)}"

    # a gate that passes: its handler's lines name it
    kube.apply(sample("mcpreadiness-refserver.yaml", refserver))
    assert kube.wait("mcpreadiness/refserver-ready", "condition=Ready", timeout_s=60).returncode == 0, state()

    # a drill with its fault in place
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    kube.apply(stack.kwok_deployment())
    stack.until(
        lambda: int(kube.get("deployment", "srv").get("status", {}).get("readyReplicas") or 0) == 3, "srv"
    )
    scale_down = {"kind": "scaleDown", "workload": "srv", "replicas": 1, "atSeconds": 0.2}
    drill = {
        "stages": [{"name": "long", "load": {"rate": 5, "durationSeconds": 120}, "faults": [scale_down]}]
    }
    checks = {"healthProbe": {"requests": 100, "minSuccessRatio": 0.99, "maxProberLagMs": 250}}
    kube.apply(
        stack.custom_resource(
            "MCPReadiness", "drill", {"target": {"url": refserver}, "checks": checks, "drill": drill}
        )
    )
    stack.until(
        lambda: any(f["phase"] == "Injected" for f in _faults(kube, "drill")) and _replicas(kube) == 1,
        "the fault is in place",
        state=state,
    )

    # and a probe round that would run for minutes in a worker process
    stuck = {"requests": 100, "concurrency": 1, "timeoutMs": 60000, "minSuccessRatio": 0.9}
    kube.apply(
        stack.custom_resource(
            "MCPReadiness", "stuck", {"target": {"url": silent_server}, "checks": {"healthProbe": stuck}}
        )
    )
    workers = stack.until(
        lambda: {p: c for p, c in _children(popen.pid).items() if "spawn_main" in c},
        "a probe round in a worker process",
        state=state,
    )
    time.sleep(1)

    started = time.monotonic()
    os.kill(popen.pid, signal.SIGTERM)  # what the kubelet sends the container's process
    code = popen.wait(timeout=SHUTDOWN_TIMEOUT_S + 15)
    took = time.monotonic() - started
    print(f"SIGTERM to exit: {took:.2f}s, {len(workers)} worker(s)")
    assert code == 0, state()
    assert took < SHUTDOWN_TIMEOUT_S, state()
    assert not [pid for pid in workers if _running(pid)], f"workers left running: {workers}"
    # the drill's fault was reverted on the way out, not left for the next operator
    assert _replicas(kube) == 3, state()
    assert [f["phase"] for f in _faults(kube, "drill")] == ["Reverted"]

    # every line is one JSON object; the handlers' lines name their object
    lines = [json.loads(line) for line in mine.process.log_path.read_text().splitlines() if line.strip()]
    for line in lines:
        assert {"time", "level", "logger", "message"} <= line.keys(), line
    about = {(line.get("namespace"), line.get("name")) for line in lines}
    assert (kube.namespace, "refserver-ready") in about
    assert (kube.namespace, "drill") in about
    messages = [line["message"] for line in lines]
    # the metrics' deletion handler runs (and logs) for deletions only, not every status write
    # (objects of earlier tests' namespaces, deleted while this operator ran, may log it)
    mine_deleted = [
        line
        for line in lines
        if "forget_deleted_gate" in line["message"] and line.get("namespace") == kube.namespace
    ]
    assert not mine_deleted, mine_deleted
    assert any("SIGTERM" in m for m in messages), messages[-20:]
    assert "stopped 1 drill(s); their faults are reverted" in messages, messages[-20:]
    assert any(m.startswith("stopped ") and "worker process" in m for m in messages), messages[-20:]

    # the rest of the session gets an operator again; the stuck gate goes first
    kube.run("delete", "mcpreadiness", "stuck", "--wait=false")
    replacement = stack.start_operator(kube.kubeconfig, tmp_path)
    operator.process, operator.metrics_url = replacement.process, replacement.metrics_url
    # the next operator finds the journal closed and ends the run as interrupted, not failed
    stack.until(
        lambda: stack.condition_of(kube.get("mcpreadiness", "drill")).get("reason") == "DrillInterrupted",
        "the drill ended DrillInterrupted",
        state=lambda: json.dumps(kube.get("mcpreadiness", "drill").get("status"), indent=1),
    )
    assert [f["phase"] for f in _faults(kube, "drill")] == ["Reverted"] and _replicas(kube) == 3
