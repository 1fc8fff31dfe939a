"""containerd for the real node: its configuration (a pure function) and its process, on a
socket and directories of this node's own, so a containerd the machine already runs is untouched.

The settings this machine needs (each found by running it here):

* ``restrict_oom_score_adj``: the sandbox lacks CAP_SYS_RESOURCE in every bounding set, and runc
  then fails to lower a container's OOM score ("can't get final child's PID from pipe: EOF");
* ``SystemdCgroup = false``: there is no systemd; the kubelet uses the cgroupfs driver too;
* ``sandbox_image``: the pause image imported here (the node's own images are never pulled);
* CNI from Debian's ``/usr/lib/cni``, configured per node (``node.cni_config``);
* ``registry.config_path``: a ``hosts.toml`` per registry host under the node's own directory, read
  on each pull, so a test can point the node at a plain-HTTP registry on loopback
  (:func:`trust_http_registry`) as a user's cluster pulls from theirs.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..processes import ManagedProcess, StartupError, stop_pid, wait_until

NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin keeps Kubernetes' images in
CNI_BIN_DIR = "/usr/lib/cni"


def short_run_dir(key: Path, kind: str) -> Path:
    """A directory for sockets under /run, named by a digest of ``key``: a unix socket's path
    holds at most 107 bytes, and containerd adds suffixes (``.ttrpc``) to its socket's, so a
    path under a test's temporary directory is too long."""
    return Path("/run/mcp-operator") / f"{kind}-{hashlib.sha256(str(key).encode()).hexdigest()[:10]}"


@dataclass(frozen=True)
class RuntimePaths:
    """Where one node's containerd keeps its data (``root``) and its sockets and runtime state
    (``run``, short: see :func:`short_run_dir`)."""

    root: Path
    run: Path

    @property
    def socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def data(self) -> Path:
        return self.root / "root"

    @property
    def state(self) -> Path:
        return self.run / "state"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "net.d"

    @property
    def registry_hosts(self) -> Path:
        """containerd's ``config_path``: ``<host>/hosts.toml`` for each registry it is told of."""
        return self.root / "certs.d"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"


def containerd_config(paths: RuntimePaths, sandbox_image: str) -> str:
    """containerd 1.6's configuration (version 2) for a CRI node without systemd."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{paths.data}"
state = "{paths.state}"
oom_score = 0

[grpc]
  address = "{paths.socket}"

[{cri}]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  enable_selinux = false
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = false

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "/usr/sbin/runc"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{paths.cni_conf_dir}"
  max_conf_num = 1

[{cri}.registry]
  config_path = "{paths.registry_hosts}"
"""


def http_registry_hosts(host: str) -> str:
    """``hosts.toml`` for a registry that serves plain HTTP at ``host`` (``127.0.0.1:<port>``):
    without it containerd speaks HTTPS to the host, which the registry does not answer."""
    return f'server = "http://{host}"\n'


def trust_http_registry(paths: RuntimePaths, host: str) -> Path:
    """Pulls of ``host/...`` images go to it over HTTP from now on (containerd reads the file on
    each pull: no restart); returns the file, which removing undoes it."""
    directory = paths.registry_hosts / host
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts.toml").write_text(http_registry_hosts(host))
    return directory / "hosts.toml"


def ctr(paths: RuntimePaths, *args: str, stdin: bytes | None = None) -> str:
    """One ``ctr`` command against this node's containerd, in Kubernetes' namespace."""
    result = subprocess.run(
        ["ctr", "--address", str(paths.socket), "--namespace", NAMESPACE, *args],
        input=stdin,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)}: {result.stderr.decode(errors='replace')[-2000:]}")
    return result.stdout.decode(errors="replace")


def start_containerd(
    paths: RuntimePaths, sandbox_image: str, log: Path, timeout_s: float = 60
) -> ManagedProcess:
    """containerd on ``paths``; ready once ``ctr version`` answers through its socket."""
    for directory in (
        paths.root,
        paths.run,
        paths.data,
        paths.state,
        paths.cni_conf_dir,
        paths.registry_hosts,
    ):
        directory.mkdir(parents=True, exist_ok=True)
    paths.config.write_text(containerd_config(paths, sandbox_image))
    proc = ManagedProcess("containerd", ["containerd", "--config", str(paths.config)], log)
    proc.start()

    def answers() -> bool:
        try:
            ctr(paths, "version")
        except RuntimeError:
            return False
        return True

    try:
        wait_until(proc, answers, timeout_s=timeout_s, what="serving its socket")
    except StartupError:
        if proc.popen is not None:
            stop_pid(proc.popen.pid)
        raise
    return proc


def import_image(paths: RuntimePaths, archive: Path) -> None:
    """A ``docker save`` archive into containerd's Kubernetes namespace (its layers unpacked)."""
    ctr(paths, "images", "import", "--no-unpack=false", str(archive))


def image_names(paths: RuntimePaths) -> set[str]:
    return {line.split()[0] for line in ctr(paths, "images", "ls", "-q").splitlines() if line.strip()}
