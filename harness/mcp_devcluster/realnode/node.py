"""The real node's kubelet, address and pod network, and taking all of it down again.

Its address: kubelet refuses a loopback node IP, so the node gets one on an interface the harness
creates (``mcp-real0``, 10.213.0.2/32, a veth whose peer sits in a network namespace of its own):
local to this machine and never routed off it.
Its pods: a CNI bridge (``mcp-realbr0``) with host-local addresses from the node's pod CIDR,
the bridge their gateway into this machine.
Its Services: the cluster's service range (:data:`SERVICE_CIDR`) is routed to this machine as a
whole (a ``local`` route on ``lo``), so the harness's service proxy can listen on any ClusterIP
in it and a pod's packets to a ClusterIP reach that listener; nothing is forwarded, NATed or
written into the machine's firewall. Names: CoreDNS (``dns``) on the node's address, the
kubelet's ``clusterDNS``.

kubelet sets kernel tunables it wants (``kernel.panic``, ``kernel.panic_on_oops``,
``vm.overcommit_memory``); they are read before it starts and written back when it stops.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import build
from ..certs import PkiPaths, issue_kubelet_serving_pair
from ..nodes import wait_nodes_ready
from ..processes import ManagedProcess, StartupError, free_port, stop_pid, wait_until
from . import runtime

NODE_NAME = "mcp-real"
NODE_LINK = "mcp-real0"
NODE_IP = "10.213.0.2"
NODE_NETNS = "mcp-realnode"
POD_CIDR = "10.213.1.0/24"
SERVICE_CIDR = "10.213.16.0/20"  # the cluster's ClusterIPs: DevCluster(service_cidr=...)
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = "mcp-realbr0"
ZONE = "zone-real"
# pods land here only when they ask: the process nodes stay where every other test's pods go
TAINT = "mcp2026.io/real-node=true:NoSchedule"
LABEL = "mcp2026.io/node-kind=real"
KERNEL_TUNABLES = ("kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory")


def kubelet_config(
    *,
    endpoint: str,
    ca: Path,
    cert: Path,
    key: Path,
    port: int,
    healthz_port: int,
    node_ip: str,
    pod_cidr: str,
    cluster_dns: str,
) -> dict[str, Any]:
    """KubeletConfiguration for this machine: cgroup v1 through cgroupfs (no systemd), no image
    garbage collection (nothing could be pulled back), no swap check, eviction only near a full disk."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": endpoint,
        "address": node_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "podCIDR": pod_cidr,
        # no KUBE-FIREWALL and canary chains in the machine's iptables (they outlived the node and
        # dropped other traffic to loopback): the harness writes nothing into the host's firewall
        "makeIPTablesUtilChains": False,
        "clusterDNS": [cluster_dns],
        "clusterDomain": CLUSTER_DOMAIN,
        "failSwapOn": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        "maxPods": 30,
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "shutdownGracePeriod": "0s",
        "logging": {"format": "text", "verbosity": 1},
    }


def cni_config(bridge: str, pod_cidr: str, leases: Path) -> dict[str, Any]:
    """A bridge with host-local addresses; the gateway is the bridge's own address. The address
    leases live in ``leases``, under the node's root: containers killed at ``down`` never hand
    theirs back, and in the plugin's default directory (shared by every run) they would fill the
    pod CIDR run after run."""
    return {
        "cniVersion": "0.4.0",
        "name": "mcp-real",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr}]],
                    "dataDir": str(leases),
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _has_route(cidr: str) -> bool:
    shown = _ip("-o", "route", "show", "table", "local", "type", "local", cidr, check=False)
    return shown.returncode == 0 and cidr in shown.stdout


def has_node_network(link: str = NODE_LINK, address: str = NODE_IP, services: str = SERVICE_CIDR) -> bool:
    shown = _ip("-o", "addr", "show", "dev", link, check=False)
    return shown.returncode == 0 and f" {address}/32 " in shown.stdout and _has_route(services)


def add_node_network(
    link: str = NODE_LINK, address: str = NODE_IP, netns: str = NODE_NETNS, services: str = SERVICE_CIDR
) -> None:
    """A veth pair, its far end in a network namespace of its own, the near end carrying the
    node's address (this kernel has no dummy interfaces), and the service range routed to this
    machine. Kept when it is there already (an API server may listen on it); anything else under
    the names is replaced."""
    if has_node_network(link, address, services):
        return
    remove_node_network(link, netns, services)
    _ip("netns", "add", netns)
    _ip("link", "add", link, "type", "veth", "peer", "name", f"{link}p", "netns", netns)
    _ip("addr", "add", f"{address}/32", "dev", link)
    _ip("link", "set", link, "up")
    _ip("-n", netns, "link", "set", f"{link}p", "up")
    _ip("route", "add", "local", services, "dev", "lo")


KUBELET_CHAINS = {
    "filter": ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY"),
    "nat": ("KUBE-KUBELET-CANARY",),
    "mangle": ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"),
}


def _succeeds(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def remove_kubelet_chains() -> None:
    """The chains a kubelet with its iptables utility rules on left in the machine's firewall
    (earlier runs' kubelets did), and the jumps to them; nothing else is touched."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for chain in ("INPUT", "OUTPUT"):
            while _succeeds(tool, "-t", "filter", "-D", chain, "-j", "KUBE-FIREWALL"):
                pass  # one jump removed per call, as many as earlier runs added
        for table, chains in KUBELET_CHAINS.items():
            for name in chains:
                _succeeds(tool, "-t", table, "-F", name)
                _succeeds(tool, "-t", table, "-X", name)


def remove_links(*links: str) -> None:
    for link in links:
        _ip("link", "del", link, check=False)


def remove_node_network(link: str = NODE_LINK, netns: str = NODE_NETNS, services: str = SERVICE_CIDR) -> None:
    _ip("route", "del", "local", services, "dev", "lo", check=False)
    remove_links(link)
    _ip("netns", "del", netns, check=False)


def _tunable(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_tunables() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in KERNEL_TUNABLES:
        with contextlib.suppress(OSError):
            out[name] = _tunable(name).read_text().strip()
    return out


def restore_tunables(saved: dict[str, str]) -> None:
    for name, value in saved.items():
        with contextlib.suppress(OSError):
            _tunable(name).write_text(value)


@dataclass
class RealNodeState:
    """What ``up`` leaves for ``down`` (possibly in another process)."""

    root: str
    node: str
    node_ip: str
    pids: dict[str, int] = field(default_factory=dict)
    tunables: dict[str, str] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    startup_seconds: dict[str, float] = field(default_factory=dict)

    def save(self) -> None:
        (Path(self.root) / "state.json").write_text(json.dumps(self.__dict__, indent=2))

    @classmethod
    def load(cls, root: Path) -> RealNodeState:
        return cls(**json.loads((root / "state.json").read_text()))


def start_kubelet(
    root: Path, kubeconfig: Path, pki: PkiPaths, paths: runtime.RuntimePaths, timeout_s: float
) -> tuple[ManagedProcess, float]:
    """The kubelet, registering :data:`NODE_NAME`; returns once the Node is Ready."""
    cert, key = root / "kubelet.crt", root / "kubelet.key"
    issue_kubelet_serving_pair(pki, cert, key, NODE_IP)
    config = kubelet_config(
        endpoint=paths.endpoint,
        ca=pki.ca_cert,
        cert=cert,
        key=key,
        port=free_port(),
        healthz_port=free_port(),
        node_ip=NODE_IP,
        pod_cidr=POD_CIDR,
        cluster_dns=NODE_IP,
    )
    (root / "kubelet.yaml").write_text(yaml.safe_dump(config))
    argv = [
        str(build.binary("kubernetes-node", "kubelet")),
        f"--config={root / 'kubelet.yaml'}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={root / 'kubelet'}",
        f"--cert-dir={root / 'kubelet-pki'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={NODE_IP}",
        f"--node-labels={LABEL},topology.kubernetes.io/zone={ZONE}",
        f"--register-with-taints={TAINT}",
    ]
    proc = ManagedProcess("kubelet-real", argv, root / "kubelet.log")
    proc.start()
    try:
        took = wait_until(
            proc, lambda: wait_nodes_ready(kubeconfig, [NODE_NAME]), timeout_s=timeout_s, what="Node Ready"
        )
    except StartupError:
        if proc.popen is not None:
            stop_pid(proc.popen.pid)
        raise
    return proc, took


def _network_namespaces(paths: runtime.RuntimePaths, container: str) -> list[str]:
    """The named network namespaces (``/var/run/netns/cni-…``) a container joins: its pod
    sandbox's, which only the CRI's teardown would delete."""
    with contextlib.suppress(RuntimeError, ValueError, KeyError, TypeError):
        spec = json.loads(runtime.ctr(paths, "containers", "info", container))["Spec"]
        return [
            Path(ns["path"]).name
            for ns in spec["linux"]["namespaces"]
            if ns.get("type") == "network"
            and str(ns.get("path", "")).startswith(("/var/run/netns/", "/run/netns/"))
        ]
    return []


def remove_containers(paths: runtime.RuntimePaths) -> None:
    """Every task and container containerd runs for the node, killed and deleted, and the pods'
    network namespaces with them: stopping the kubelet and containerd leaves the containers'
    shims running, and killing them under the CRI leaves its namespaces behind."""
    namespaces: set[str] = set()
    with contextlib.suppress(RuntimeError):
        for line in runtime.ctr(paths, "tasks", "ls", "-q").splitlines():
            with contextlib.suppress(RuntimeError):
                runtime.ctr(paths, "tasks", "kill", "-s", "SIGKILL", line.strip())
        time.sleep(0.5)
        for line in runtime.ctr(paths, "tasks", "ls", "-q").splitlines():
            with contextlib.suppress(RuntimeError):
                runtime.ctr(paths, "tasks", "delete", "-f", line.strip())
        for line in runtime.ctr(paths, "containers", "ls", "-q").splitlines():
            namespaces.update(_network_namespaces(paths, line.strip()))
            with contextlib.suppress(RuntimeError):
                runtime.ctr(paths, "containers", "delete", line.strip())
    for name in sorted(namespaces):
        _ip("netns", "del", name, check=False)


def unmount_under(root: Path) -> None:
    """Mounts the kubelet and containerd left under ``root`` (pod volumes, rootfs, shm)."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(root))), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
