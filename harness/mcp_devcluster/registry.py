"""A container registry on loopback, so a test can push images and have a node pull them as a
user's cluster does (README, "In your own cluster"), with no registry outside this machine.

Debian's ``docker-registry`` (the distribution project's registry, 2.8), plain HTTP on
127.0.0.1, its storage in a directory of the caller's, no authentication. Docker pushes to a
127.0.0.0/8 registry over HTTP by default; containerd does once told so
(``realnode.runtime.trust_http_registry``).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .processes import ManagedProcess, StartupError, accepts, free_port, stop_pid, wait_until

PACKAGE = "docker-registry"
# what ``docker push`` writes; the registry answers a manifest's digest for it
MANIFEST_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
)


def config(storage: Path, port: int) -> str:
    """The registry's configuration (JSON, which its YAML parser reads): loopback only, the
    blobs under ``storage``, deletes allowed, nothing else (no auth, no health checks)."""
    return json.dumps(
        {
            "version": 0.1,
            "log": {"level": "info", "fields": {"service": "registry"}},
            "storage": {"filesystem": {"rootdirectory": str(storage)}, "delete": {"enabled": True}},
            "http": {"addr": f"127.0.0.1:{port}"},
        },
        indent=2,
    )


@dataclass
class Registry:
    process: ManagedProcess
    port: int
    root: Path

    @property
    def host(self) -> str:
        """What goes before an image's repository: ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def manifest_digest(self, repository: str, tag: str) -> str | None:
        """The digest of ``repository:tag``'s manifest as the registry serves it (what a pull
        resolves the tag to), or None when the registry has no such tag."""
        request = urllib.request.Request(
            f"{self.url}/v2/{repository}/manifests/{tag}",
            method="HEAD",
            headers={"Accept": ", ".join(MANIFEST_TYPES)},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.headers.get("Docker-Content-Digest")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise


def binary() -> str:
    found = shutil.which("docker-registry")
    if found is None:
        raise StartupError(
            f"docker-registry is not installed (the Debian package {PACKAGE}: make system-packages)"
        )
    return found


def start(root: Path, timeout_s: float = 30) -> Registry:
    """The registry on a free loopback port, its configuration, storage and log under ``root``;
    ready once it accepts connections."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    (root / "storage").mkdir(exist_ok=True)
    (root / "config.json").write_text(config(root / "storage", port))
    # REGISTRY_* variables override the file's settings: none of the caller's reach it
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    process = ManagedProcess(
        "docker-registry", [binary(), "serve", str(root / "config.json")], root / "registry.log", env
    )
    process.start()
    try:
        wait_until(process, lambda: accepts(port), timeout_s=timeout_s, what=f"accepting on 127.0.0.1:{port}")
    except BaseException:
        stop(Registry(process, port, root))
        raise
    return Registry(process, port, root)


def stop(registry: Registry) -> None:
    if registry.process.popen is not None:
        stop_pid(registry.process.popen.pid)
