"""Process control of the harness, with real processes: groups stopped, startup failures told."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_devcluster.processes import (
    ManagedProcess,
    StartupError,
    free_port,
    http_ok,
    running,
    stop_pid,
    wait_until,
)


def _live_group_members(pgid: int) -> set[int]:
    """Pids in the process group that are still running (zombies waiting for a reaper are dead)."""
    members = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces, so split after the last ')'
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            members.add(int(entry.name))
    return members


def _wait_for(predicate: object, timeout_s: float = 10.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[ManagedProcess]]:
    """Processes a test starts; whatever is left is stopped afterwards."""
    procs: list[ManagedProcess] = []
    yield procs
    for proc in procs:
        if proc.popen is not None:
            stop_pid(proc.popen.pid, grace_s=1.0)


def _start(started: list[ManagedProcess], tmp_path: Path, script: str, name: str = "p") -> ManagedProcess:
    proc = ManagedProcess(name, ["sh", "-c", script], tmp_path / "logs" / f"{name}.log")
    proc.start()
    started.append(proc)
    return proc


def test_stop_pid_ends_the_whole_group(started: list[ManagedProcess], tmp_path: Path) -> None:
    proc = _start(started, tmp_path, "sleep 60 & sleep 60 & wait")
    pid = proc.popen.pid if proc.popen else 0
    assert os.getpgid(pid) == pid  # its own session and group
    assert _wait_for(lambda: len(_live_group_members(pid)) == 3), _live_group_members(pid)
    stop_pid(pid, grace_s=5.0)
    assert _wait_for(lambda: not _live_group_members(pid)), _live_group_members(pid)


def test_stop_pid_escalates_to_sigkill(started: list[ManagedProcess], tmp_path: Path) -> None:
    # SIGTERM is ignored by the shell and (inherited) by its child
    proc = _start(started, tmp_path, "trap '' TERM; sleep 60 & wait")
    pid = proc.popen.pid if proc.popen else 0
    assert _wait_for(lambda: len(_live_group_members(pid)) == 2)
    stop_pid(pid, grace_s=0.3)
    assert _wait_for(lambda: not _live_group_members(pid)), _live_group_members(pid)


def test_stop_pid_of_a_gone_process_is_quiet(started: list[ManagedProcess], tmp_path: Path) -> None:
    proc = _start(started, tmp_path, "exit 0")
    assert proc.popen is not None
    proc.popen.wait(timeout=10)
    stop_pid(proc.popen.pid, grace_s=0.1)
    stop_pid(proc.popen.pid, grace_s=0.1)


def test_wait_until_reports_an_early_exit_with_the_log(started: list[ManagedProcess], tmp_path: Path) -> None:
    proc = _start(started, tmp_path, "echo 'bind: address already in use'; exit 3", name="etcd")
    with pytest.raises(StartupError) as info:
        wait_until(proc, lambda: False, timeout_s=10, what="healthy")
    message = str(info.value)
    assert "etcd exited with code 3 before healthy" in message
    assert "address already in use" in message


def test_wait_until_returns_once_ready(started: list[ManagedProcess], tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    proc = _start(started, tmp_path, f"sleep 0.2; touch {marker}; sleep 60")
    waited = wait_until(proc, marker.exists, timeout_s=10, what="ready")
    assert marker.exists() and waited > 0
    assert proc.exited() is None  # still running: readiness does not stop it


def test_wait_until_times_out(started: list[ManagedProcess], tmp_path: Path) -> None:
    proc = _start(started, tmp_path, "echo starting; sleep 60", name="kube-apiserver")
    with pytest.raises(StartupError, match=r"kube-apiserver not ready after 0s:\nstarting"):
        wait_until(proc, lambda: False, timeout_s=0.3, what="ready")


def test_log_tail(started: list[ManagedProcess], tmp_path: Path) -> None:
    proc = _start(started, tmp_path, "for i in $(seq 1000); do echo line-$i; done")
    assert proc.popen is not None and proc.popen.wait(timeout=10) == 0
    tail = proc.log_tail(limit=100)
    assert len(tail) == 100 and tail.endswith("line-1000\n")
    assert ManagedProcess("x", ["true"], tmp_path / "never.log").log_tail() == ""


def test_free_port_is_bindable_on_loopback() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 500)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def test_http_ok() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert http_ok(f"{base}/healthz") is True
        assert http_ok(f"{base}/broken") is False
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert http_ok(f"http://127.0.0.1:{free_port()}/healthz", timeout=1.0) is False


def test_a_zombie_is_not_running_though_kill_0_finds_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert running(child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while running(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(child.pid)
        os.kill(child.pid, 0)  # still there, unreaped: what kill(pid, 0) alone would call alive
    finally:
        child.wait(timeout=10)
    assert not running(child.pid)
