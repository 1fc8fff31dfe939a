"""The real node's images, built here without any registry and imported into containerd.

* base: a Debian bookworm root filesystem (``mmdebstrap --variant=minbase`` with python3,
  python3-venv, ca-certificates and tini), cached as a tarball keyed by its recipe;
* pause: Kubernetes' own ``build/pause/linux/pause.c`` from the module cache, linked statically;
* the operator: the repository's ``Dockerfile`` with ``BASE`` the base image and a wheelhouse of
  the package built by the host's pip (the image has no index to reach);
* the reference server: the base image with the harness's wheelhouse.

A Docker daemon of the harness's own (``BuildDaemon``: data under the cache, no bridge, no
iptables) builds them; ``docker save`` hands each to containerd (``runtime.import_image``).
Images are tagged by a digest of their inputs, so a warm run rebuilds nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import build
from ..processes import ManagedProcess, stop_pid, wait_until

REPO = Path(__file__).resolve().parents[3]
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "tini")
DOCKER = "/usr/bin/docker"  # Debian's client, of the daemon's own version
# the build daemon's sockets (short: a unix socket's path holds at most 107 bytes); one daemon
# at a time uses it (``lifecycle.prepare_images`` holds a lock)
DOCKER_RUN_DIR = Path("/run/mcp-operator/docker")
_PRODUCT_SOURCES = ("pyproject.toml", "README.md", "operator", "bench", "checks", "common")


def images_dir() -> Path:
    return build.cache_root() / "images"


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()[:12]


def _tree_digest(paths: list[Path]) -> bytes:
    """The content of the files under ``paths`` (sources only), in a stable order."""
    h = hashlib.sha256()
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc" or ".egg-info" in str(f):
                continue
            h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    return h.digest()


@dataclass
class BuildDaemon:
    """dockerd with its data in the cache (images survive between runs) and its sockets under
    ``run_dir``; it touches no network setting of the machine."""

    run_dir: Path
    process: ManagedProcess | None = None
    data_root: Path | None = None  # None: the cache's (one such daemon at a time, under its lock)

    @property
    def host(self) -> str:
        return f"unix://{self.run_dir / 'docker.sock'}"

    def start(self, timeout_s: float = 60) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        data = self.data_root or build.cache_root() / "docker"
        argv = [
            "dockerd",
            f"--data-root={data}",
            f"--exec-root={self.run_dir / 'exec'}",
            f"--pidfile={self.run_dir / 'docker.pid'}",
            f"--host={self.host}",
            "--bridge=none",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--storage-driver=overlay2",
        ]
        self.process = ManagedProcess("dockerd", argv, self.run_dir / "dockerd.log")
        self.process.start()
        wait_until(self.process, lambda: self._answers(), timeout_s=timeout_s, what="serving its socket")

    def _succeeds(self, *args: str) -> bool:
        command = [DOCKER, "-H", self.host, *args]
        return subprocess.run(command, capture_output=True, check=False).returncode == 0

    def _answers(self) -> bool:
        return self._succeeds("version")

    def stop(self) -> None:
        if self.process is not None and self.process.popen is not None:
            stop_pid(self.process.popen.pid, grace_s=15)
        self.process = None

    def docker(self, *args: str, stdin: bytes | None = None) -> str:
        env = {**os.environ, "DOCKER_BUILDKIT": "0"}
        result = subprocess.run(
            [DOCKER, "-H", self.host, *args], input=stdin, capture_output=True, env=env, check=False
        )
        if result.returncode != 0:
            out = (result.stdout + result.stderr).decode(errors="replace")
            raise RuntimeError(f"docker {' '.join(args[:3])} failed:\n{out[-3000:]}")
        return result.stdout.decode(errors="replace")

    def has(self, image: str) -> bool:
        return self._succeeds("image", "inspect", image)

    def save(self, image: str, archive: Path) -> Path:
        self.docker("save", "-o", str(archive), image)
        return archive


def base_image(daemon: BuildDaemon) -> str:
    """The Debian base image, from a cached ``mmdebstrap`` tarball (made once, about 40 to 100 s)."""
    key = _digest(DEBIAN_SUITE.encode(), ",".join(BASE_PACKAGES).encode())
    name = f"mcp-operator/base:{DEBIAN_SUITE}-{key}"
    if daemon.has(name):
        return name
    rootfs = images_dir() / f"base-{DEBIAN_SUITE}-{key}.tar"
    if not rootfs.is_file():
        rootfs.parent.mkdir(parents=True, exist_ok=True)
        partial = rootfs.with_suffix(".partial")
        for leftover in (rootfs, partial):  # a crashed run's, or a directory an older build left
            if leftover.is_dir():
                shutil.rmtree(leftover)
            leftover.unlink(missing_ok=True)
        subprocess.run(
            [
                "mmdebstrap",
                "--quiet",
                "--variant=minbase",
                "--format=tar",  # never guessed from the name: ".partial" made a directory
                f"--include={','.join(BASE_PACKAGES)}",
                DEBIAN_SUITE,
                str(partial),
            ],
            check=True,
            capture_output=True,
        )
        partial.rename(rootfs)
    daemon.docker("import", "--change", 'CMD ["/bin/bash"]', str(rootfs), name)
    return name


def pause_image(daemon: BuildDaemon) -> str:
    """Kubernetes' pause container: its C source from the module cache, linked statically."""
    source = _kubernetes_module_dir() / "build" / "pause" / "linux" / "pause.c"
    name = f"mcp-operator/pause:{build.KUBERNETES_VERSION}-{_digest(source.read_bytes())}"
    if daemon.has(name):
        return name
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "pause"
        subprocess.run(
            [
                "gcc",
                "-Os",
                "-static",
                "-Wall",
                f"-DVERSION={build.KUBERNETES_VERSION}",
                "-o",
                str(binary),
                str(source),
            ],
            check=True,
            capture_output=True,
        )
        archive = Path(tmp) / "pause.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(binary, arcname="pause")
        daemon.docker("import", "--change", 'ENTRYPOINT ["/pause"]', str(archive), name)
    return name


def _kubernetes_module_dir() -> Path:
    return build.module_dir("k8s.io/kubernetes", build.KUBERNETES_VERSION)


def _wheelhouse(target: Path, *projects: Path) -> None:
    """Wheels of ``projects`` and every dependency, built by the host's pip (same Python minor,
    same glibc as the image), so the image's pip needs no index."""
    build_requirements = ("setuptools>=77", "wheel")  # what pip's isolated build of a project installs
    subprocess.run(
        [
            "python3",
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--wheel-dir",
            str(target),
            *map(str, projects),
            *build_requirements,
        ],
        check=True,
        capture_output=True,
    )


def operator_image(daemon: BuildDaemon, base: str) -> str:
    """The repository's Dockerfile, built offline: ``BASE`` the Debian base, pip on wheels."""
    key = _digest(base.encode(), _tree_digest([REPO / p for p in _PRODUCT_SOURCES] + [REPO / "Dockerfile"]))
    name = f"mcp-operator/operator:{key}"
    if daemon.has(name):
        return name
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        for item in (*_PRODUCT_SOURCES, "Dockerfile", ".dockerignore"):
            src = REPO / item
            if src.is_dir():
                shutil.copytree(
                    src, context / item, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
                )
            else:
                shutil.copy2(src, context / item)
        _wheelhouse(context / "wheels", REPO)
        daemon.docker(
            "build",
            "--quiet",
            "--network=host",
            "--build-arg",
            f"BASE={base}",
            "--build-arg",
            "PIP_FLAGS=--no-index --find-links /src/wheels",
            "-t",
            name,
            str(context),
        )
    return name


_REFSERVER_DOCKERFILE = """FROM {base}
COPY wheels /wheels
RUN python3 -m venv /opt/refserver \\
    && /opt/refserver/bin/pip install --no-cache-dir --no-index --find-links /wheels mcp-devcluster \\
    && rm -rf /wheels
ENV PATH=/opt/refserver/bin:$PATH PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT ["tini", "--", "mcp-refserver"]
"""


def refserver_image(daemon: BuildDaemon, base: str) -> str:
    """The reference inference server (the harness's distribution) on the Debian base."""
    harness = REPO / "harness"
    key = _digest(
        base.encode(),
        _REFSERVER_DOCKERFILE.encode(),
        # the server's sources only: the harness's other package rides along in the wheel but
        # never runs in this image, so its edits need no rebuild
        _tree_digest([harness / "pyproject.toml", harness / "mcp_refserver"]),
        _tree_digest([REPO / p for p in _PRODUCT_SOURCES]),
    )
    name = f"mcp-operator/refserver:{key}"
    if daemon.has(name):
        return name
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        (context / "Dockerfile").write_text(_REFSERVER_DOCKERFILE.format(base=base))
        _wheelhouse(context / "wheels", harness, REPO)
        daemon.docker("build", "--quiet", "--network=host", "-t", name, str(context))
    return name


def prune(daemon: BuildDaemon, keep: list[str]) -> None:
    """Remove the harness's images other than ``keep`` (tags of earlier sources) and dangling
    layers, so the cache holds one build of each image."""
    listed = daemon.docker("images", "--format", "{{.Repository}}:{{.Tag}}", "mcp-operator/*")
    stale = [name for name in listed.split() if name not in keep and not name.endswith(":<none>")]
    if stale:
        daemon.docker("rmi", *stale)
    daemon.docker("image", "prune", "--force")


@dataclass(frozen=True)
class NodeImages:
    """The images a real node holds, by the names containerd knows them under."""

    pause: str
    base: str
    operator: str
    refserver: str
    seconds: float


def containerd_name(docker_name: str) -> str:
    """containerd's name for an image ``docker save`` wrote: the full reference Docker implies
    (``docker.io/`` before a name without a registry host, ``library/`` before a single part)."""
    first, _, rest = docker_name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return docker_name
    return f"docker.io/{docker_name}" if rest else f"docker.io/library/{docker_name}"


def build_all(daemon: BuildDaemon) -> NodeImages:
    began = time.monotonic()
    base = base_image(daemon)
    pause = pause_image(daemon)
    operator = operator_image(daemon, base)
    refserver = refserver_image(daemon, base)
    return NodeImages(pause, base, operator, refserver, time.monotonic() - began)
