"""The local kubelet's pods as real local processes, without a cluster: a container's command
runs with its env, its exit code and termination message become the pod's status, and a
deleted pod's processes stop within the grace period."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from kubernetes import client

from mcp_devcluster.containers import RunningContainer, start_container, stop_containers
from mcp_devcluster.podstatus import completed_status, unrunnable_status
from mcp_devcluster.termination import MESSAGE_LIMIT, termination_message


def _pod(*containers: client.V1Container) -> client.V1Pod:
    return client.V1Pod(spec=client.V1PodSpec(containers=list(containers)))


def _container(name: str, script: str, policy: str | None = None) -> client.V1Container:
    return client.V1Container(
        name=name, image=f"example/{name}", command=["sh", "-c", script], termination_message_policy=policy
    )


def _run(pod: client.V1Pod, pod_dir: Path, env: dict[str, str] | None = None) -> list[RunningContainer]:
    return [start_container(spec, env or {}, pod_dir) for spec in pod.spec.containers]


def test_exit_codes_and_messages_become_the_pod_status(tmp_path: Path) -> None:
    pod = _pod(
        _container("ok", 'echo "$GREETING" > "$MCP_TERMINATION_MESSAGE_PATH"'),
        _container("bad", "echo the log tail; exit 3", policy="FallbackToLogsOnError"),
    )
    running = _run(pod, tmp_path, {"GREETING": "hello"})
    status = completed_status(pod, running, [c.proc.wait() for c in running])
    assert status["phase"] == "Failed"
    ok, bad = (s["state"]["terminated"] for s in status["containerStatuses"])
    assert (ok["exitCode"], ok["reason"], ok["message"]) == (0, "Completed", "hello\n")
    assert (bad["exitCode"], bad["reason"], bad["message"]) == (3, "Error", "the log tail")
    assert status["containerStatuses"][1]["image"] == "example/bad"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {"Ready": "False", "ContainersReady": "False"}


def test_every_container_exiting_zero_succeeds(tmp_path: Path) -> None:
    pod = _pod(_container("a", "true"), _container("b", "true"))
    running = _run(pod, tmp_path)
    assert completed_status(pod, running, [c.proc.wait() for c in running])["phase"] == "Succeeded"


def test_a_deleted_pod_stops_within_its_grace_period(tmp_path: Path) -> None:
    pod = _pod(_container("sleeper", "exec sleep 60"))
    running = _run(pod, tmp_path)
    began = time.monotonic()
    stop_containers(running, grace_s=5)
    assert time.monotonic() - began < 5
    terminated = completed_status(pod, running, [c.proc.wait() for c in running])["containerStatuses"][0]
    assert terminated["state"]["terminated"]["exitCode"] == 128 + signal.SIGTERM
    assert terminated["state"]["terminated"]["signal"] == signal.SIGTERM


def test_a_process_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    running = _run(_pod(_container("stubborn", "trap '' TERM; while :; do sleep 0.1; done")), tmp_path)
    time.sleep(0.2)  # let the shell install its trap
    stop_containers(running, grace_s=0)
    assert running[0].proc.wait() == -signal.SIGKILL


def test_fallback_to_logs_only_after_a_failure_with_nothing_written(tmp_path: Path) -> None:
    message, log = tmp_path / "message", tmp_path / "log"
    message.write_text("")
    log.write_text("".join(f"line {i}\n" for i in range(200)))
    fallback = termination_message(message, log, "FallbackToLogsOnError", 1)
    assert fallback.splitlines() == [f"line {i}" for i in range(120, 200)]
    assert termination_message(message, log, "FallbackToLogsOnError", 0) == ""
    assert termination_message(message, log, "File", 1) == ""
    message.write_text("x" * (MESSAGE_LIMIT + 10))
    assert termination_message(message, log, "FallbackToLogsOnError", 1) == "x" * MESSAGE_LIMIT


def test_an_unrunnable_pod_fails_with_start_error() -> None:
    pod = _pod(client.V1Container(name="main", image="example/main"))
    status = unrunnable_status(pod, "no command")
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "StartError", "no command")
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (128, "StartError")
