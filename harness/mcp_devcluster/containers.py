"""A pod's containers as local processes, from start to stop.

Each container's command runs in a session of its own, so a signal reaches the children it
starts too; deleting the pod sends SIGTERM, then SIGKILL once the grace period is over.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from mcp_checks.verdict import utc_now

from .podenv import ContainerSpecError, expand_refs
from .podnet import HOST_NETWORK, PodAddresses
from .termination import MESSAGE_PATH_ENV, message_file


@dataclass
class RunningContainer:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    message_path: Path
    message_policy: str
    started_at: str
    ready: bool = True  # a container with a readiness probe starts not ready
    env: dict[str, str] = field(default_factory=dict)  # as the pod spec makes it, for hooks


@dataclass
class RunningPod:
    namespace: str
    name: str
    uid: str
    addresses: PodAddresses = HOST_NETWORK
    containers: list[RunningContainer] = field(default_factory=list)
    deleted: bool = False
    # set once the pod's processes are gone or going: its probes stop
    stopped: threading.Event = field(default_factory=threading.Event)
    pod: client.V1Pod | None = None  # the latest object seen, for status updates between events


def require_command(spec: client.V1Container) -> None:
    """There are no images here, so a container must say what to run."""
    if not spec.command and not spec.args:
        raise ContainerSpecError(
            f"container {spec.name!r} has no command: the local runner cannot use image entrypoints"
        )


def start_container(
    spec: client.V1Container, env: dict[str, str], pod_dir: Path, prefix: list[str] | None = None
) -> RunningContainer:
    """Run the container's command and args (``$(VAR)`` expanded) in ``pod_dir``, output to its log;
    ``prefix`` (``podvolumes.mount_prefix``) mounts its volumes first."""
    message_path = message_file(pod_dir, spec.name)
    env = {**env, MESSAGE_PATH_ENV: str(message_path)}
    argv = [
        *(prefix or []),
        *(expand_refs(part, env) for part in [*(spec.command or []), *(spec.args or [])]),
    ]
    log_path = pod_dir / f"{spec.name}.log"
    proc_env = {**os.environ, **env}
    # the runner's own console scripts (mcp-operator, mcp-bench) stand in for the image's
    proc_env["PATH"] = f"{Path(sys.executable).parent}:{proc_env.get('PATH', '')}"
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=proc_env,
            cwd=str(pod_dir),
            start_new_session=True,
        )
    return RunningContainer(
        spec.name,
        proc,
        log_path,
        message_path,
        spec.termination_message_policy or "File",
        utc_now(),
        ready=spec.readiness_probe is None,
        env=env,
    )


def stop_containers(containers: list[RunningContainer], grace_s: int) -> None:
    """SIGTERM every container, then SIGKILL those still running when the grace period (at
    least a second) is over; returns once all have exited."""
    signal_containers(containers, signal.SIGTERM)
    deadline = time.monotonic() + max(grace_s, 1)
    for c in containers:
        try:
            c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(c.proc, signal.SIGKILL)
            c.proc.wait()


def signal_containers(containers: list[RunningContainer], sig: int) -> None:
    for c in containers:
        _signal_group(c.proc, sig)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(proc.pid), sig)
