"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok for simulated nodes, our local kubelet for the two nodes (two zones) whose
pods really run, and our service proxy, which routes each Service's ClusterIP (a loopback
address: the service CIDR lies in 127.0.0.0/8) to its ready endpoints.

``DevCluster.up()`` starts everything in order and waits for each piece to be ready;
``down()`` stops them in reverse order. The state directory records PIDs and ports, so a
cluster started by one process (``mcp-devcluster up``) can be stopped by another.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import ssl
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from . import build
from .addressplan import SLOTS, AddressPlan, claim_plan, release
from .certs import PkiPaths, generate_pki, kubeconfig_dict, write_kubeconfig
from .localnode import format_taint
from .nodes import create_simulated_nodes, wait_default_service_account, wait_nodes_ready
from .nodespec import LocalNode, SimulatedNode, default_local_nodes, default_nodes
from .processes import (
    ManagedProcess,
    StartupError,
    client_ssl_context,
    free_port,
    http_ok,
    stop_pid,
    wait_until,
)

LOCAL_NODE = "mcp-local"  # the local node of zone-a, where pods go unless spread
KWOK_NODE_LABEL = "type=kwok"
CONTROLLERS = ",".join(
    f"{name}-controller"
    for name in [
        "job",
        "garbage-collector",
        "namespace",
        "serviceaccount",
        "serviceaccount-token",
        "replicaset",
        "deployment",
        "ttl-after-finished",
        "pod-garbage-collector",
        "root-ca-certificate-publisher",
        "endpointslice",
        "statefulset",
        "daemonset",
        "disruption",
        "cronjob",
        "resourcequota",
        "clusterrole-aggregation",
        "horizontal-pod-autoscaler",
    ]
)
HPA_SYNC_PERIOD = "1s"  # the autoscaler reads its metrics every second (15 s by default)
# DevCluster(node_lifecycle=True): nodes that stop posting status go NotReady and are tainted,
# their pods marked not ready and evicted, as in a real cluster, on a scale a test can wait for
NODE_LIFECYCLE_CONTROLLERS = "node-lifecycle-controller,taint-eviction-controller"
NODE_GRACE_S = 8  # --node-monitor-grace-period: no status for this long and the node is Unknown
NODE_HEARTBEAT_S = 2.0  # how often the local kubelets post status then (well inside the grace)
NODE_TOLERATION_S = 2  # the default tolerationSeconds of pods for not-ready and unreachable


@dataclass
class ClusterState:
    """What ``up`` leaves behind for ``env`` and ``down``."""

    state_dir: str
    kubeconfig: str
    server: str
    etcd_port: int
    apiserver_port: int
    pids: dict[str, int]
    started_at: float
    startup_seconds: dict[str, float]
    service_proxy: str = ""  # the service proxy's admin URL (/routes, /healthz)
    service_cidr: str = ""  # every ClusterIP is in it: a loopback range of its own, or a real node's
    pod_loopback: str = ""  # where pod IPs are served (``podnet.loopback_twin``)
    etcd_endpoints: list[str] = field(default_factory=list)  # every member's client URL
    # free ports, chosen at `up`, for an operator run by hand beside this cluster (its liveness
    # probe and metrics), so two users' quick starts on one host do not collide
    operator_liveness: str = ""
    operator_metrics_port: int = 0

    @classmethod
    def load(cls, state_dir: Path) -> ClusterState:
        return cls(**json.loads((state_dir / "state.json").read_text()))

    def save(self) -> None:
        (Path(self.state_dir) / "state.json").write_text(json.dumps(asdict(self), indent=2))


class StateDirInUse(RuntimeError):
    """``up`` on a state directory whose control plane is running."""

    def __init__(self, state_dir: Path, state: ClusterState) -> None:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.started_at))
        owner = _owner(state.pids)
        super().__init__(
            f"a local control plane already runs from {state_dir} (API server {state.server}, started "
            f"{started}{f' by {owner}' if owner else ''}). Use it (mcp-devcluster env --state-dir "
            f"{state_dir}), stop it (mcp-devcluster down --state-dir {state_dir}; after make demo "
            f"KEEP=1: make demo-down), or start another with --state-dir DIR."
        )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _owner(pids: dict[str, int]) -> str:
    """The user whose processes they are (the API server's first), from /proc."""
    for pid in pids.values():
        try:
            uid = Path(f"/proc/{pid}").stat().st_uid
        except OSError:
            continue
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"
    return ""


def running_cluster(state_dir: Path) -> ClusterState | None:
    """The control plane recorded in ``state_dir`` if any of its processes still runs."""
    try:
        state = ClusterState.load(state_dir)
    except (FileNotFoundError, json.JSONDecodeError, TypeError):
        return None
    return state if any(_pid_alive(pid) for pid in state.pids.values()) else None


def default_state_dir() -> Path:
    return build.cache_root() / "clusters" / "default"


class DevCluster:
    """Lifecycle of one local control plane."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        nodes: list[SimulatedNode] | None = None,
        local_nodes: list[LocalNode] | None = None,
        timeout_s: float = 90.0,
        etcd_members: int = 1,
        api_address: str = "127.0.0.1",
        service_cidr: str | None = None,
        node_lifecycle: bool = False,
    ) -> None:
        """``etcd_members``: 1 (fast, the default) or 3, so that an etcd leader can really move
        (the control-plane write-outage drill). ``api_address``: where the API server listens and
        what it advertises; on loopback (the default) it writes no endpoint for the ``kubernetes``
        Service, so only a real node's address (``realnode.node.NODE_IP``) lets pods reach it
        through that Service. ``service_cidr``: a range routed to this machine for the ClusterIPs
        (a real node's pods reach no loopback address); by default one of loopback's own.
        ``node_lifecycle``: the controller manager also runs the node-lifecycle and taint-eviction
        controllers (a node that stops posting status goes NotReady within ``NODE_GRACE_S``, its
        pods are marked not ready and evicted after ``NODE_TOLERATION_S``), the local kubelets
        post every ``NODE_HEARTBEAT_S``; off by default: kwok's nodes and the tests' cordons do
        without it."""
        self.node_lifecycle = node_lifecycle
        self.api_address = api_address
        self.service_cidr = service_cidr
        if etcd_members not in (1, 3):
            raise ValueError(f"etcd_members must be 1 or 3, not {etcd_members}")
        self.etcd_members = etcd_members
        self.state_dir = (state_dir or default_state_dir()).resolve()
        self.nodes = default_nodes() if nodes is None else nodes
        self.local_nodes = default_local_nodes() if local_nodes is None else local_nodes
        self.timeout_s = timeout_s
        self.processes: list[ManagedProcess] = []
        self.state: ClusterState | None = None
        # the loopback ranges this cluster uses; ``up`` claims a slot no other cluster holds
        self.plan = AddressPlan(SLOTS[0])
        self._claim: socket.socket | None = None

    # -- paths -----------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    def _bin(self, component: str, command: str) -> str:
        return str(build.binary(component, command))

    @property
    def components(self) -> list[str]:
        """What this cluster is built from: kwok only where it has simulated nodes."""
        return ["kubernetes", "etcd", *(["kwok"] if self.nodes else [])]

    # -- lifecycle -------------------------------------------------------------------------
    def up(self) -> ClusterState:
        """Build what is missing, then start every component; on any failure stop them all. A
        state directory whose recorded control plane still runs is refused (StateDirInUse), not
        taken over: it may be another shell's, or another user's."""
        running = running_cluster(self.state_dir)
        if running is not None:
            raise StateDirInUse(self.state_dir, running)
        if (self.state_dir / "state.json").exists():
            self._stop_recorded()
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self.state_dir.mkdir(parents=True)
        build.ensure_all(self.components)
        try:
            self.plan, self._claim = claim_plan(self.service_cidr)
            return self._start_all()
        except BaseException:
            self.down()
            raise
        finally:
            release(self._claim)  # the service proxy holds it from now on (or nobody)
            self._claim = None

    def _start_all(self) -> ClusterState:
        pki = generate_pki(self.state_dir / "pki", self.plan.kubernetes_service_ip, self.api_address)
        etcd_ports = [(free_port(), free_port()) for _ in range(self.etcd_members)]
        etcd_port, api_port = etcd_ports[0][0], free_port()
        endpoints = [f"http://127.0.0.1:{client_port}" for client_port, _ in etcd_ports]
        server = f"https://{self.api_address}:{api_port}"
        write_kubeconfig(
            self.kubeconfig,
            kubeconfig_dict(server, pki.ca_cert, client_cert=pki.admin_cert, client_key=pki.admin_key),
        )
        timings: dict[str, float] = {}
        began = time.monotonic()

        members = [
            self._spawn(self._etcd_process(i), self._etcd_argv(i, etcd_ports)) for i in range(len(etcd_ports))
        ]
        timings["etcd"] = wait_until(
            members[0],
            lambda: (
                all(m.exited() is None for m in members) and all(http_ok(f"{e}/health") for e in endpoints)
            ),
            timeout_s=self.timeout_s,
            what="healthy",
        )
        apiserver = self._spawn("kube-apiserver", self._apiserver_argv(pki, endpoints, api_port))
        ctx = client_ssl_context(pki.ca_cert, pki.admin_cert, pki.admin_key)
        timings["kube-apiserver"] = wait_until(
            apiserver,
            lambda: http_ok(f"{server}/readyz", context=ctx),
            timeout_s=self.timeout_s,
            what="ready",
        )
        kcm_port, sched_port = free_port(), free_port()
        kcm = self._spawn("kube-controller-manager", self._kcm_argv(pki, kcm_port))
        sched = self._spawn("kube-scheduler", self._scheduler_argv(sched_port))
        insecure = _no_verify_context()
        timings["kube-controller-manager"] = wait_until(
            kcm,
            lambda: http_ok(f"https://127.0.0.1:{kcm_port}/healthz", context=insecure),
            timeout_s=self.timeout_s,
            what="healthy",
        )
        timings["kube-scheduler"] = wait_until(
            sched,
            lambda: http_ok(f"https://127.0.0.1:{sched_port}/healthz", context=insecure),
            timeout_s=self.timeout_s,
            what="healthy",
        )
        if self.nodes:  # kwok plays the simulated nodes; a cluster without any needs no kwok
            kwok_port = free_port()
            kwok = self._spawn("kwok", self._kwok_argv(kwok_port))
            timings["kwok"] = wait_until(
                kwok,
                lambda: http_ok(f"http://127.0.0.1:{kwok_port}/healthz"),
                timeout_s=self.timeout_s,
                what="healthy",
            )
        kubelets = [self._spawn(f"kubelet-{n.name}", self._kubelet_argv(n)) for n in self.local_nodes]
        create_simulated_nodes(self.kubeconfig, self.nodes)
        names = [n.name for n in self.local_nodes] + [n.name for n in self.nodes]
        if names:  # none for a cluster whose only node is a real one (``realnode``), added later
            timings["nodes"] = wait_until(
                kubelets[0] if kubelets else apiserver,
                lambda: (
                    all(k.exited() is None for k in kubelets) and wait_nodes_ready(self.kubeconfig, names)
                ),
                timeout_s=self.timeout_s,
                what="nodes Ready",
            )
        host, port = self.plan.proxy_address
        proxy_admin = f"http://{host}:{port}"
        assert self._claim is not None
        claim = self._claim.fileno()
        proxy = self._spawn("service-proxy", self._proxy_argv(claim), pass_fds=(claim,))
        timings["service-proxy"] = wait_until(
            proxy, lambda: http_ok(f"{proxy_admin}/healthz"), timeout_s=self.timeout_s, what="routing"
        )
        timings["default-serviceaccount"] = wait_until(
            kcm,
            lambda: wait_default_service_account(self.kubeconfig),
            timeout_s=self.timeout_s,
            what="serving the default service account",
        )
        timings["total"] = time.monotonic() - began
        self.state = ClusterState(
            state_dir=str(self.state_dir),
            kubeconfig=str(self.kubeconfig),
            server=server,
            etcd_port=etcd_port,
            apiserver_port=api_port,
            pids={p.name: p.popen.pid for p in self.processes if p.popen},
            started_at=time.time(),
            startup_seconds={k: round(v, 2) for k, v in timings.items()},
            service_proxy=proxy_admin,
            service_cidr=self.plan.service_cidr,
            pod_loopback=str(self.plan.pod_loopback),
            etcd_endpoints=endpoints,
            operator_liveness=f"http://127.0.0.1:{free_port()}/healthz",
            operator_metrics_port=free_port(),
        )
        self.state.save()
        return self.state

    def down(self) -> None:
        """Stop every component in reverse start order; safe to call twice."""
        for proc in reversed(self.processes):
            if proc.popen is not None:
                stop_pid(proc.popen.pid)
        self.processes.clear()
        self._stop_recorded()

    def _stop_recorded(self) -> None:
        try:
            state = ClusterState.load(self.state_dir)
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return
        for pid in reversed(list(state.pids.values())):
            stop_pid(pid)
        (self.state_dir / "state.json").unlink(missing_ok=True)

    # -- process arguments -----------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], pass_fds: tuple[int, ...] = ()) -> ManagedProcess:
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)
        proc = ManagedProcess(name, argv, self.logs / f"{name}.log", env=env, pass_fds=pass_fds)
        proc.start()
        self.processes.append(proc)
        return proc

    @staticmethod
    def _etcd_process(index: int) -> str:
        """The first member keeps the names a single one has (``etcd``, ``mcp-dev``)."""
        return "etcd" if index == 0 else f"etcd-{index + 1}"

    def _etcd_argv(self, index: int, ports: list[tuple[int, int]]) -> list[str]:
        names = ["mcp-dev" if i == 0 else f"mcp-dev-{i + 1}" for i in range(len(ports))]
        client = f"http://127.0.0.1:{ports[index][0]}"
        peer = f"http://127.0.0.1:{ports[index][1]}"
        cluster = ",".join(f"{n}=http://127.0.0.1:{p}" for n, (_, p) in zip(names, ports, strict=True))
        return [
            self._bin("etcd", "etcd"),
            f"--name={names[index]}",
            f"--data-dir={self.state_dir / self._etcd_process(index)}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={cluster}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
            "--quota-backend-bytes=2147483648",
        ]

    def _apiserver_argv(self, pki: PkiPaths, etcd_endpoints: list[str], api_port: int) -> list[str]:
        return [
            self._bin("kubernetes", "kube-apiserver"),
            f"--etcd-servers={','.join(etcd_endpoints)}",
            f"--bind-address={self.api_address}",
            f"--advertise-address={self.api_address}",
            f"--secure-port={api_port}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={self.plan.service_cidr}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            # nodes here have no node-lifecycle controller to lift the not-ready taint this plugin adds
            "--disable-admission-plugins=TaintNodesByCondition",
            *(
                [
                    f"--default-not-ready-toleration-seconds={NODE_TOLERATION_S}",
                    f"--default-unreachable-toleration-seconds={NODE_TOLERATION_S}",
                ]
                if self.node_lifecycle
                else []
            ),
            "--profiling=false",
            f"--cert-dir={self.state_dir / 'pki' / 'apiserver'}",
            # pod logs (``kubectl logs``, the operator's attestation check) from the local kubelets,
            # whose Nodes advertise 127.0.0.1 and whose names do not resolve
            f"--kubelet-client-certificate={pki.kubelet_client_cert}",
            f"--kubelet-client-key={pki.kubelet_client_key}",
            f"--kubelet-certificate-authority={pki.ca_cert}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--v=1",
        ]

    def _kcm_argv(self, pki: PkiPaths, port: int) -> list[str]:
        return [
            self._bin("kubernetes", "kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            f"--controllers={CONTROLLERS},{NODE_LIFECYCLE_CONTROLLERS}"
            if self.node_lifecycle
            else f"--controllers={CONTROLLERS}",
            *(
                [f"--node-monitor-grace-period={NODE_GRACE_S}s", "--node-monitor-period=1s"]
                if self.node_lifecycle
                else []
            ),
            f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            "--use-service-account-credentials=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / 'pki' / 'kcm'}",
            "--concurrent-job-syncs=5",
            "--v=1",
        ]

    def _scheduler_argv(self, port: int) -> list[str]:
        return [
            self._bin("kubernetes", "kube-scheduler"),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / 'pki' / 'scheduler'}",
            "--v=1",
        ]

    def _kubelet_argv(self, node: LocalNode) -> list[str]:
        pki = PkiPaths(self.state_dir / "pki")
        argv = [sys.executable, "-m", "mcp_devcluster.kubelet", f"--kubeconfig={self.kubeconfig}"]
        argv += [f"--tls-cert-file={pki.kubelet_serving_cert}", f"--client-ca-file={pki.ca_cert}"]
        argv += [f"--tls-private-key-file={pki.kubelet_serving_key}"]
        argv += [f"--node={node.name}", f"--zone={node.zone}", f"--pod-cidr={node.pod_cidr}"]
        argv += [f"--pod-loopback={self.plan.pod_loopback}"]
        argv += [f"--register-with-taints={format_taint(t)}" for t in node.taints]
        if self.node_lifecycle:
            argv += [f"--heartbeat-seconds={NODE_HEARTBEAT_S}"]
        return [*argv, f"--work-dir={self.state_dir / 'pods' / node.name}"]

    def _proxy_argv(self, admin_fd: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "mcp_devcluster.serviceproxy",
            f"--kubeconfig={self.kubeconfig}",
            f"--pod-loopback={self.plan.pod_loopback}",
            f"--admin-fd={admin_fd}",
        ]

    def _kwok_argv(self, port: int) -> list[str]:
        stages = resources.files("mcp_devcluster") / "data" / "kwok-stages.yaml"
        config = self.state_dir / "kwok-stages.yaml"
        config.write_text(stages.read_text())
        return [
            self._bin("kwok", "kwok"),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={config}",
            f"--manage-nodes-with-label-selector={KWOK_NODE_LABEL}",
            f"--server-address=127.0.0.1:{port}",
            "--node-ip=127.0.0.2",
            "--cidr=10.244.0.0/16",
        ]


def _no_verify_context() -> ssl.SSLContext:
    """Health endpoints of kcm/scheduler serve self-signed certs; only liveness is probed."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


__all__ = [
    "LOCAL_NODE",
    "AddressPlan",
    "ClusterState",
    "DevCluster",
    "LocalNode",
    "SimulatedNode",
    "StartupError",
]
