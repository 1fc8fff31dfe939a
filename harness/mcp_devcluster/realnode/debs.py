"""The Debian packages a real node needs, installed once through apt (quietly: one line).

Why Debian's and not upstream releases: the machine reaches Debian's archive and the Go module
proxy, and nothing else; containerd, runc and the CNI plugins are packaged there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

PACKAGES = (
    "containerd",
    "runc",
    "containernetworking-plugins",
    "docker.io",  # builds the images (`docker build`), then `docker save` hands them to containerd
    "mmdebstrap",  # the base image's root filesystem
    "iptables",
    "tini",  # the containers' init: a Python PID 1 alone ignores SIGTERM
)


def missing(packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """The packages dpkg does not list as installed."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = {line.split()[0] for line in out.stdout.splitlines() if line.endswith(" installed")}
    return [p for p in packages if p not in installed]


def ensure_packages(packages: tuple[str, ...] = PACKAGES) -> float:
    """Install what is missing; returns the seconds it took (0 when nothing was missing)."""
    todo = missing(packages)
    if not todo:
        return 0.0
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"the real node needs these Debian packages, as root: {' '.join(todo)}")
    began = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *todo],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"apt-get install {' '.join(todo)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
        )
    return time.monotonic() - began
