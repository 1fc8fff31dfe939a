"""Chaos Mesh for the real node: its CustomResourceDefinitions, its controller and its daemon,
all from the Go module proxy (the module ``github.com/chaos-mesh/chaos-mesh``; the ``chaos-mesh``
build component), run as local processes instead of the images of its Helm chart.

* ``chaos-controller-manager`` runs against the cluster's admin kubeconfig. Its webhook server
  always starts (it needs a certificate: a self-signed one), but no webhook configuration is
  registered, so nothing fills in defaults: an experiment must spell out every field it uses.
* ``chaos-daemon`` talks to the real node's containerd. The controller finds it through an
  EndpointSlice ``chaos-daemon-<node>`` in the ``chaos-mesh`` namespace, by the target pod's node
  name, and dials its address over plain gRPC; the API server refuses loopback addresses there,
  so that address is the real node's own. The daemon has no bind address flag: it listens on
  every address of the machine.
* The daemon runs each command in a pod as ``/usr/local/bin/nsexec`` (a fixed path; nsexec is a
  Rust binary from GitHub releases that cannot be had here): ``data/chaosmesh/nsexec`` stands in
  for it over util-linux ``nsenter``. The daemon runs in a mount namespace of its own, where that
  shim's directory is bind-mounted onto /usr/local/bin; its start-up remount of /sys stays there.

What works on this machine: NetworkChaos partition (ipset and iptables in the pod's network
namespace) and bandwidth (tbf), PodChaos container-kill and pod-kill. What cannot: NetworkChaos
delay, loss, duplicate and corrupt need the kernel's netem qdisc, which this kernel lacks (with
no module loading), so the daemon's ``tc qdisc add ... netem`` fails and the experiment is never
injected.

The module has no tagged releases on the proxy; its version is pinned in ``build``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import build, certs, stack
from .processes import ManagedProcess, StartupError, accepts, free_port, http_ok, stop_pid, wait_until

MODULE = "github.com/chaos-mesh/chaos-mesh"
VERSION = build.CHAOS_MESH_VERSION
CRD_DIR = "config/crd/bases"
NAMESPACE = "chaos-mesh"  # where the controller looks for the daemons' EndpointSlices
NSEXEC_SHIM = Path(__file__).parent / "data" / "chaosmesh" / "nsexec"
NSEXEC_DIR = "/usr/local/bin"  # where chaos-daemon runs nsexec from (hard-coded)


def module_dir() -> Path:
    """The module's source, downloaded through the module proxy on first use (then cached)."""
    return build.module_dir(MODULE, VERSION)


def crd_files(plurals: list[str]) -> list[Path]:
    """The CRD manifests of these plurals (``networkchaos``, ``stresschaos``, ``podchaos``, ...)."""
    base = module_dir() / CRD_DIR
    files = [base / f"chaos-mesh.org_{plural}.yaml" for plural in plurals]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"not in {MODULE}@{VERSION}: {', '.join(missing)}")
    return files


def install_crds(kubeconfig: Path) -> None:
    """Every CRD of the module: the controller watches all its kinds and fails without one.
    Server-side, since the largest are past client-side apply's annotation limit."""
    base = str(module_dir() / CRD_DIR)
    stack.kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", base, timeout=300)
    stack.kubectl(kubeconfig, "wait", "--for=condition=Established", "-f", base, timeout=300)


@dataclass(frozen=True)
class Ports:
    grpc: int  # the daemon's, which the controller dials
    http: int  # the daemon's metrics
    metrics: int  # the controller's
    webhook: int  # the controller's (serving, though nothing calls it)

    @classmethod
    def free(cls) -> Ports:
        return cls(free_port(), free_port(), free_port(), free_port())


def controller_env(kubeconfig: Path, certs_dir: Path, ports: Ports) -> dict[str, str]:
    """The controller's settings (it reads them from the environment, as its chart sets them)."""
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "NAMESPACE": NAMESPACE,
        "ENABLE_LEADER_ELECTION": "false",
        "METRICS_PORT": str(ports.metrics),
        "WEBHOOK_PORT": str(ports.webhook),
        "CERTS_DIR": str(certs_dir),
        "CHAOS_DAEMON_SERVICE_PORT": str(ports.grpc),
    }


def daemon_argv(daemon: Path, shim_dir: Path, containerd_socket: Path, ports: Ports) -> list[str]:
    """chaos-daemon in a private mount namespace where ``shim_dir`` is /usr/local/bin: the shim
    is seen by the daemon alone, and the mount goes away with it. ``unshare`` and ``sh`` exec, so
    the process started is the daemon itself."""
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount --bind "$0" {NSEXEC_DIR} && exec "$@"',
        str(shim_dir),
        str(daemon),
        "--runtime",
        "containerd",
        "--runtime-socket-path",
        str(containerd_socket),
        "--containerd-ns",
        "k8s.io",
        "--grpc-port",
        str(ports.grpc),
        "--http-port",
        str(ports.http),
    ]


def daemon_endpoint_slice(node_name: str, node_ip: str, grpc_port: int) -> dict[str, Any]:
    """What the controller looks the node's daemon up by (the chart's daemon Service makes it)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"chaos-daemon-{node_name}", "namespace": NAMESPACE},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node_ip], "nodeName": node_name, "conditions": {"ready": True}}],
        "ports": [{"name": "grpc", "port": grpc_port, "protocol": "TCP"}],
    }


@dataclass
class ChaosMesh:
    """A running Chaos Mesh: what :func:`stop_chaos_mesh` takes down."""

    kubeconfig: Path
    node_name: str
    ports: Ports
    processes: list[ManagedProcess]

    def log_tails(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail()}" for p in self.processes)


def _nsexec_dir(root: Path) -> Path:
    """The shim in a directory of its own (it hides the whole of /usr/local/bin from the daemon),
    executable whatever the checkout kept of its mode."""
    shim_dir = root / "nsexec"
    shim_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(NSEXEC_SHIM, shim_dir / "nsexec")
    (shim_dir / "nsexec").chmod(0o755)
    return shim_dir


def start_chaos_mesh(
    cluster_state_dir: Path,
    kubeconfig: Path,
    containerd_socket: Path,
    node_name: str,
    node_ip: str,
    timeout_s: float = 180,
) -> ChaosMesh:
    """CRDs, namespace, the daemon on ``node_ip`` and its EndpointSlice, then the controller;
    returns once both serve. On a failure what was started is stopped again."""
    bin_dir = build.ensure_all(["chaos-mesh"])["chaos-mesh"]
    root = cluster_state_dir / "chaos-mesh"
    root.mkdir(parents=True, exist_ok=True)
    install_crds(kubeconfig)
    stack.kubectl(kubeconfig, "create", "namespace", NAMESPACE, check=False)
    ports = Ports.free()
    mesh = ChaosMesh(kubeconfig, node_name, ports, [])
    try:
        daemon = ManagedProcess(
            "chaos-daemon",
            daemon_argv(bin_dir / "chaos-daemon", _nsexec_dir(root), containerd_socket, ports),
            root / "chaos-daemon.log",
        )
        mesh.processes.append(daemon)
        daemon.start()
        wait_until(daemon, lambda: accepts(ports.grpc, node_ip), timeout_s=timeout_s, what="serving gRPC")
        slice_body = json.dumps(daemon_endpoint_slice(node_name, node_ip, ports.grpc))
        stack.kubectl(kubeconfig, "apply", "-f", "-", input_text=slice_body)
        certs_dir = root / "certs"
        certs_dir.mkdir(exist_ok=True)
        certs.self_signed_pair(certs_dir, "127.0.0.1", "chaos-mesh-webhook")
        controller = ManagedProcess(
            "chaos-controller-manager",
            [str(bin_dir / "chaos-controller-manager")],
            root / "chaos-controller-manager.log",
            env=controller_env(kubeconfig, certs_dir, ports),
        )
        mesh.processes.append(controller)
        controller.start()
        metrics = f"http://127.0.0.1:{ports.metrics}/metrics"
        wait_until(controller, lambda: http_ok(metrics), timeout_s=timeout_s, what="serving metrics")
    except (StartupError, RuntimeError, OSError, subprocess.SubprocessError):
        stop_chaos_mesh(mesh)
        raise
    return mesh


def stop_chaos_mesh(mesh: ChaosMesh) -> None:
    """The controller first (nothing dials the daemon after), then the daemon (its mount
    namespace goes with it), then its EndpointSlice. Experiments still present are the caller's:
    deleting them needs both running (their finalizers wait for the recovery)."""
    for proc in reversed(mesh.processes):
        if proc.popen is not None:
            stop_pid(proc.popen.pid)
    stack.kubectl(
        mesh.kubeconfig,
        "-n",
        NAMESPACE,
        "delete",
        "endpointslice",
        f"chaos-daemon-{mesh.node_name}",
        "--ignore-not-found",
        check=False,
    )
