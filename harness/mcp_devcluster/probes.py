"""Readiness probes and preStop hooks of the local kubelet: the handlers that make a pod join
its Services only once it serves, and leave them before it stops.

Without probes a pod is Ready the moment its process starts, the endpointslice controller
publishes it, and the service proxy sends connections to a port nobody listens on yet: every
replacement pod would look like an outage. ``httpGet``, ``tcpSocket`` and ``exec`` run as the
kubelet runs them (against the pod's own address, success and failure thresholds, period and
initial delay); ``grpc`` is approximated by a TCP connect to its port. A preStop hook (``sleep``,
``exec``, ``httpGet``) runs before SIGTERM, within the grace period, so a pod can keep serving
while its endpoint is withdrawn, as graceful shutdowns in real clusters do.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

log = logging.getLogger("mcp_devcluster.probes")


@dataclass
class ProbeCounter:
    """Consecutive results against the thresholds; a container starts not ready."""

    success_threshold: int = 1
    failure_threshold: int = 3
    ready: bool = False
    successes: int = 0
    failures: int = 0

    def record(self, ok: bool) -> bool:
        """Count one probe result; True when it changed readiness."""
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if not self.ready and self.successes >= self.success_threshold:
                self.ready = True
                return True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.ready and self.failures >= self.failure_threshold:
                self.ready = False
                return True
        return False


def resolve_port(port: int | str, container: client.V1Container) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.ports or []:
        if declared.name == port:
            return int(declared.container_port)
    raise ValueError(f"container {container.name!r} has no port named {port!r}")


def run_probe(
    probe: client.V1Probe, container: client.V1Container, host: str, env: dict[str, str], cwd: Path
) -> bool:
    """One probe run against ``host`` (the pod's bind address): True on success."""
    timeout = float(probe.timeout_seconds or 1)
    try:
        if probe.http_get is not None:
            return _http_get(probe.http_get, container, host, timeout)
        if probe.tcp_socket is not None:
            port = resolve_port(probe.tcp_socket.port, container)
            with socket.create_connection((probe.tcp_socket.host or host, port), timeout=timeout):
                return True
        if probe._exec is not None:
            done = subprocess.run(
                probe._exec.command or [],
                env=env,
                cwd=str(cwd),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
            return done.returncode == 0
        if probe.grpc is not None:
            with socket.create_connection((host, int(probe.grpc.port)), timeout=timeout):
                return True
    except (OSError, ValueError, subprocess.TimeoutExpired, http.client.HTTPException):
        return False
    return True


def _http_get(
    action: client.V1HTTPGetAction, container: client.V1Container, host: str, timeout: float
) -> bool:
    port = resolve_port(action.port, container)
    target = action.host or host
    conn: http.client.HTTPConnection
    if (action.scheme or "HTTP").upper() == "HTTPS":
        # the kubelet does not verify a probe's certificate either
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection(target, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(target, port, timeout=timeout)
    try:
        headers = {h.name: h.value for h in action.http_headers or []}
        conn.request("GET", action.path or "/", headers=headers)
        return 200 <= conn.getresponse().status < 400
    finally:
        conn.close()


def start_readiness_probe(
    container: client.V1Container,
    host: str,
    env: dict[str, str],
    cwd: Path,
    stopped: threading.Event,
    on_change: Callable[[bool], None],
) -> None:
    """Probe on a thread of its own until ``stopped``; ``on_change`` gets each new readiness."""
    probe: client.V1Probe = container.readiness_probe
    counter = ProbeCounter(probe.success_threshold or 1, probe.failure_threshold or 3)
    period = float(probe.period_seconds or 10)

    def loop() -> None:
        published = False  # the pod's first status says the container is not ready
        if stopped.wait(float(probe.initial_delay_seconds or 0)):
            return
        while True:
            counter.record(run_probe(probe, container, host, env, cwd))
            if counter.ready != published and not stopped.is_set():
                try:  # a failed update is tried again after the next probe
                    on_change(counter.ready)
                    published = counter.ready
                except Exception:
                    log.exception("publishing readiness of %s failed", container.name)
            if stopped.wait(period):
                return

    threading.Thread(target=loop, daemon=True, name=f"probe-{container.name}").start()


def run_pre_stop(
    container: client.V1Container, host: str, env: dict[str, str], cwd: Path, budget_s: float
) -> None:
    """The container's preStop hook, if it has one, cut off after ``budget_s`` (what is left of
    the grace period); its failure does not hold up the stop, as with the kubelet."""
    hook = container.lifecycle.pre_stop if container.lifecycle else None
    if hook is None or budget_s <= 0:
        return
    try:
        if hook.sleep is not None:
            time.sleep(min(float(hook.sleep.seconds), budget_s))
        elif hook._exec is not None:
            command = hook._exec.command or []
            subprocess.run(command, env=env, cwd=str(cwd), capture_output=True, timeout=budget_s, check=False)
        elif hook.http_get is not None:
            _http_get(hook.http_get, container, host, budget_s)
    except (OSError, ValueError, subprocess.TimeoutExpired, http.client.HTTPException) as exc:
        log.warning("preStop hook of %s failed: %s", container.name, exc)
