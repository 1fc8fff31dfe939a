"""Start, probe and stop the control-plane processes.

Each process runs in its own session (so a stop reaches its children) with its output in a
log file under the cluster's state directory; the PID is recorded so that ``down`` from
another process can stop what ``up`` started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class StartupError(RuntimeError):
    """A component did not become ready; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ManagedProcess:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen[bytes] | None = None
    pass_fds: tuple[int, ...] = ()  # sockets the process inherits (the service proxy's claim)

    def start(self) -> int:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
                pass_fds=self.pass_fds,
            )
        return self.popen.pid

    def exited(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return ""


def stop_pid(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace_s``."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        # reap our own children so they do not linger as zombies
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def running(pid: int) -> bool:
    """Whether ``pid`` still runs: there, and no zombie (ended, not yet reaped by its parent),
    which ``kill(pid, 0)`` alone would count as alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def accepts(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (a server that is not HTTP)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, *, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def wait_until(proc: ManagedProcess, ready: Callable[[], bool], *, timeout_s: float, what: str) -> float:
    """Poll ``ready`` until it holds; fail fast with the log tail if the process died."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        code = proc.exited()
        if code is not None:
            raise StartupError(f"{proc.name} exited with code {code} before {what}:\n{proc.log_tail()}")
        if ready():
            return time.monotonic() - started
        time.sleep(0.1)
    raise StartupError(f"{proc.name} not {what} after {timeout_s:.0f}s:\n{proc.log_tail()}")


def client_ssl_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    return ctx
