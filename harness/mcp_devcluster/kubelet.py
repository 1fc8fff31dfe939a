"""A kubelet for one node whose pods run as local processes.

There is no container runtime here, so the image is ignored and each container's command
and args run directly on this machine, with the pod's env (``podenv``) and a kubeconfig holding
a token of the pod's service account (``podtoken``), so RBAC applies as it would in a cluster.
Each pod gets a pod IP of its node's pod CIDR and a loopback twin to bind (``podnet``), so the
service proxy can route a Service to it. The pod goes Running, Ready once its readiness probes
pass (``probes``), then Succeeded or Failed with exit codes and a termination message
(``termination``), reported through the API as a kubelet would (``podstatus``).

This module is the kubelet's control loop: it watches the pods bound to its node and starts,
waits for and stops their processes (``containers``); the Node itself is ``localnode``'s, and
the containers' logs are served to the API server over HTTPS (``kubeletlogs``), so ``kubectl
logs`` works. One process plays one node; the cluster starts one per local node (one per zone).
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from mcp_checks.verdict import utc_now

from .containers import (
    RunningContainer,
    RunningPod,
    require_command,
    signal_containers,
    start_container,
    stop_containers,
)
from .kubeletlogs import log_app, serve_in_thread, server_ssl_context
from .localnode import (
    HEARTBEAT_S,
    follow_cordon,
    outage_requested,
    parse_taint,
    post_heartbeat,
    register_node,
)
from .nodes import api_client
from .nodespec import LocalNode
from .podenv import ContainerSpecError, PodEnvironment
from .podnet import HOST_NETWORK, PodAddresses, PodIPAllocator
from .podstatus import completed_status, readiness_status, running_status, unrunnable_status
from .podtoken import pod_kubeconfig
from .podvolumes import materialize, mount_prefix, refresh
from .probes import run_pre_stop, start_readiness_probe

log = logging.getLogger("mcp_devcluster.kubelet")

WATCH_TIMEOUT_S = 60
EXIT_REPORT_WITHIN_S = 300.0  # how long a pod's end is retried through an API outage
STATUS_TIMEOUT_S = 10.0  # one status update; a real kubelet's client has a timeout too
VOLUME_SYNC_S = 1.0  # how often running pods' ConfigMap and Secret volumes follow their sources


class KubeletTls(NamedTuple):
    """The kubelet's serving certificate and the CA its clients' certificates must come from."""

    cert: Path
    key: Path
    client_ca: Path


def pod_dir_name(namespace: str, name: str, uid: str) -> str:
    """A pod's directory under the work dir: its files, its containers' logs."""
    return f"{namespace}_{name}_{uid[:8]}"


def find_pod_dir(work_dir: Path, namespace: str, name: str, uid: str | None) -> Path | None:
    """The directory of the pod of that name with ``uid`` (one this kubelet runs), else the
    newest one of that name it ran (a pod that ended, also before this process started: its
    logs stay until the directory goes); None when there is none."""
    if uid is not None:
        return work_dir / pod_dir_name(namespace, name, uid)
    ran = sorted(work_dir.glob(f"{namespace}_{name}_*"), key=lambda d: d.stat().st_mtime)
    return ran[-1] if ran else None


class LocalKubelet:
    def __init__(
        self,
        kubeconfig: Path,
        node: LocalNode,
        work_dir: Path,
        pod_loopback: ipaddress.IPv4Network,
        tls: KubeletTls,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.tls = tls
        self.heartbeat_s = heartbeat_s
        # the node is down (its outage annotation): no heartbeat, no status, its pods frozen
        self.down = threading.Event()
        self.log_port = 0  # set by ``run`` once the log endpoint is served
        self.kubeconfig = kubeconfig
        self.local_node = node
        self.node = node.name
        self.work_dir = work_dir
        self.pod_ips = PodIPAllocator(node.pod_cidr, pod_loopback)
        self.api = api_client(kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.environment = PodEnvironment(self.core)
        self.pods: dict[str, RunningPod] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        cfg = self.api.configuration
        self.server: str = cfg.host
        self.ca_file: str = cfg.ssl_ca_cert

    # -- watch -----------------------------------------------------------------------------
    def run(self) -> None:
        """Register the node, then follow its pods: a full list, then a watch from there, and a
        fresh list whenever the watch ends or fails, until ``shutdown``. The log endpoint is
        served first: the Node advertises its port from the first heartbeat on."""
        ctx = server_ssl_context(self.tls.cert, self.tls.key, self.tls.client_ca)
        self.log_port = serve_in_thread(log_app(self.pod_dir), ctx)
        register_node(self.core, self.local_node, self.log_port)
        threading.Thread(target=self._heartbeat_loop, daemon=True, name="heartbeat").start()
        threading.Thread(target=self._volume_loop, daemon=True, name="volumes").start()
        threading.Thread(
            target=follow_cordon,
            args=(self.core, self.node, self.stopping, self._follow_outage),
            daemon=True,
            name="cordon",
        ).start()
        selector = f"spec.nodeName={self.node}"
        while not self.stopping.is_set():
            try:
                pods = self.core.list_pod_for_all_namespaces(field_selector=selector)
                for pod in pods.items:
                    self.sync(pod)
                stream = watch.Watch().stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=pods.metadata.resource_version,
                    timeout_seconds=WATCH_TIMEOUT_S,
                )
                for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.sync(event["object"])
                    if self.stopping.is_set():
                        break
            except Exception:
                log.exception("pod watch failed; relisting")
                time.sleep(1)

    def _heartbeat_loop(self) -> None:
        while not self.stopping.wait(self.heartbeat_s):
            if self.down.is_set():
                continue
            try:
                post_heartbeat(self.core, self.node, self.log_port)
            except Exception:
                log.exception("node heartbeat failed")

    def _volume_loop(self) -> None:
        """Running pods' ConfigMap and Secret volumes follow their sources every
        ``VOLUME_SYNC_S``, as a kubelet's volume manager does (a real one takes up to about a
        minute by default: its sync period and its cache), so a server that reloads its mounted
        config sees an update in place."""
        while not self.stopping.wait(VOLUME_SYNC_S):
            if self.down.is_set():
                continue
            with self.lock:
                running = [p for p in self.pods.values() if p.pod is not None and not p.stopped.is_set()]
            for pod in running:
                assert pod.pod is not None
                if not pod.pod.spec.volumes:
                    continue
                try:
                    changed = refresh(
                        self.core, pod.pod, self.work_dir / pod_dir_name(pod.namespace, pod.name, pod.uid)
                    )
                except Exception:
                    log.exception("volume refresh of %s/%s failed", pod.namespace, pod.name)
                    continue
                if changed:
                    log.info("pod %s/%s: volumes %s updated", pod.namespace, pod.name, ",".join(changed))

    # -- outage ------------------------------------------------------------------------------
    def _follow_outage(self, node: client.V1Node) -> None:
        """Go down as a power loss takes a node, or come back: down, every pod's processes are
        stopped (SIGSTOP: connections to them hang, as to a host that is gone) and nothing is
        written (no heartbeat, no pod status), so the node-lifecycle controller finds the node
        unreachable by itself; back up, they continue, a heartbeat goes at once and every pod is
        synced again (deletions made meanwhile, the Ready the controller took away)."""
        wanted = outage_requested(node)
        if wanted == self.down.is_set():
            return
        with self.lock:
            running = list(self.pods.values())
        if wanted:
            self.down.set()
            for pod in running:
                signal_containers(pod.containers, signal.SIGSTOP)
            log.warning(
                "node %s down (outage): %d pod(s) frozen, heartbeats stopped", self.node, len(running)
            )
            return
        for pod in running:
            signal_containers(pod.containers, signal.SIGCONT)
        self.down.clear()
        log.warning("node %s back up: %d pod(s) continued", self.node, len(running))
        try:
            post_heartbeat(self.core, self.node, self.log_port)
            for listed in self.core.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={self.node}"
            ).items:
                self.sync(listed)
        except Exception:
            log.exception("resync after the outage failed (the watch and heartbeats go on)")

    def sync(self, pod: client.V1Pod) -> None:
        """Bring one pod's processes and status in line with what the API says of it (nothing
        while the node is down)."""
        if self.down.is_set():
            return
        uid = pod.metadata.uid
        with self.lock:
            running = self.pods.get(uid)
        if pod.metadata.deletion_timestamp is not None:
            self._delete(pod, running)
            return
        if running is not None:
            self._sync_ready(pod, running)
            return
        if pod.status.phase in ("Succeeded", "Failed"):
            return
        try:
            self._start(pod)
        except ContainerSpecError as exc:
            self._patch_status(pod, unrunnable_status(pod, str(exc)))
        except Exception as exc:
            log.exception("starting %s/%s failed", pod.metadata.namespace, pod.metadata.name)
            self._patch_status(pod, unrunnable_status(pod, f"local runner could not start the pod: {exc}"))

    # -- pod lifecycle ---------------------------------------------------------------------
    def _start(self, pod: client.V1Pod) -> None:
        ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
        pod_dir = self.work_dir / pod_dir_name(ns, name, uid)
        pod_dir.mkdir(parents=True, exist_ok=True)
        kubeconfig = pod_kubeconfig(self.core, pod, pod_dir, server=self.server, ca_file=Path(self.ca_file))
        running = RunningPod(ns, name, uid, self._allocate(pod), pod=pod)
        envs: dict[str, dict[str, str]] = {}
        try:
            volumes = materialize(self.core, pod, pod_dir)
            for spec in pod.spec.containers:
                require_command(spec)
                env = self.environment.container_env(pod, spec, running.addresses)
                env["KUBECONFIG"] = str(kubeconfig)
                running.containers.append(start_container(spec, env, pod_dir, mount_prefix(spec, volumes)))
                envs[spec.name] = env
        except BaseException:
            signal_containers(running.containers, signal.SIGKILL)
            self._release(running)
            raise
        with self.lock:
            self.pods[uid] = running
        self._patch_status(pod, running_status(pod, running.containers, utc_now(), running.addresses))
        for spec, container in zip(pod.spec.containers, running.containers, strict=True):
            if spec.readiness_probe is not None:
                start_readiness_probe(
                    spec,
                    running.addresses.bind_ip,
                    {**os.environ, **envs[spec.name]},
                    pod_dir,
                    running.stopped,
                    functools.partial(self._probed, pod, running, container),
                )
        threading.Thread(target=self._wait, args=(pod, running), daemon=True, name=f"pod-{name}").start()

    def pod_dir(self, namespace: str, name: str) -> Path | None:
        """Where the logs of the pod of that name are (``find_pod_dir``)."""
        with self.lock:
            uids = [uid for uid, p in self.pods.items() if (p.namespace, p.name) == (namespace, name)]
        return find_pod_dir(self.work_dir, namespace, name, uids[0] if uids else None)

    def _allocate(self, pod: client.V1Pod) -> PodAddresses:
        if pod.spec.host_network:
            return HOST_NETWORK
        with self.lock:
            return self.pod_ips.allocate(pod.status.pod_ip if pod.status else None)

    def _release(self, running: RunningPod) -> None:
        if running.addresses != HOST_NETWORK:
            with self.lock:
                self.pod_ips.release(running.addresses.pod_ip)

    def _wait(self, pod: client.V1Pod, running: RunningPod) -> None:
        codes = [c.proc.wait() for c in running.containers]
        log.info("pod %s/%s ended: exit codes %s", pod.metadata.namespace, pod.metadata.name, codes)
        running.stopped.set()
        self._release(running)
        if running.deleted:
            return
        self._report_exit(pod, completed_status(pod, running.containers, codes))
        log.info("pod %s/%s: its end reported", pod.metadata.namespace, pod.metadata.name)

    def _report_exit(self, pod: client.V1Pod, status: dict[str, Any]) -> None:
        """A pod's end is reported until the API server takes it, as a real kubelet's status
        manager does: a pod that ends while the API server restarts would otherwise look Running
        for ever."""
        delay, deadline = 0.2, time.monotonic() + EXIT_REPORT_WITHIN_S
        while True:
            try:
                self._patch_status(pod, status, strict=True)
                return
            except Exception as exc:
                if self.stopping.is_set() or time.monotonic() + delay > deadline:
                    log.error("status update of %s failed: %s", pod.metadata.name, exc)
                    return
                log.warning(
                    "status update of %s failed (%s); retrying", pod.metadata.name, type(exc).__name__
                )
                self.stopping.wait(delay)
                delay = min(delay * 2, 5.0)

    def _delete(self, pod: client.V1Pod, running: RunningPod | None) -> None:
        """Stop the pod's processes (on their own thread: a grace period must not hold up the
        watch), then remove the pod, as a kubelet does once its containers are gone."""
        if running is None:
            self._remove(pod)
        elif not running.deleted:
            running.deleted = True
            running.stopped.set()
            threading.Thread(target=self._terminate, args=(pod, running), daemon=True).start()

    def _terminate(self, pod: client.V1Pod, running: RunningPod) -> None:
        """preStop hooks first, then SIGTERM and SIGKILL, all within the grace period."""
        grace = pod.metadata.deletion_grace_period_seconds or 0
        deadline = time.monotonic() + grace
        pod_dir = running.containers[0].log_path.parent if running.containers else self.work_dir
        for spec, container in zip(pod.spec.containers, running.containers, strict=False):
            budget = deadline - time.monotonic()
            env = {**os.environ, **container.env}
            run_pre_stop(spec, running.addresses.bind_ip, env, pod_dir, budget)
        stop_containers(running.containers, max(0, round(deadline - time.monotonic())))
        self._remove(pod)

    def _remove(self, pod: client.V1Pod) -> None:
        with self.lock:
            self.pods.pop(pod.metadata.uid, None)
        try:
            self.core.delete_namespaced_pod(
                pod.metadata.name,
                pod.metadata.namespace,
                # with a body, the API server reads every option from it, not from the query
                body=client.V1DeleteOptions(
                    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=pod.metadata.uid)
                ),
            )
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.error("removing pod %s failed: %s", pod.metadata.name, exc)

    # -- status ----------------------------------------------------------------------------
    def _sync_ready(self, pod: client.V1Pod, running: RunningPod) -> None:
        """A running pod's Ready follows its probes and readiness gates, as the kubelet's status
        manager does; ``running.pod`` keeps the latest object for the probes' updates."""
        running.pod = pod
        if pod.status.phase != "Running" or running.stopped.is_set():
            return
        wanted = readiness_status(pod, running.containers, utc_now())
        current = {c.type: c.status for c in pod.status.conditions or []}
        if any(current.get(c["type"]) != c["status"] for c in wanted["conditions"]):
            self._patch_status(pod, wanted)

    def _probed(
        self, pod: client.V1Pod, running: RunningPod, container: RunningContainer, ready: bool
    ) -> None:
        """A readiness probe changed its verdict: publish the pod's readiness at once."""
        container.ready = ready
        latest = running.pod or pod
        self._patch_status(latest, readiness_status(latest, running.containers, utc_now()), strict=True)

    def _patch_status(self, pod: client.V1Pod, status: dict[str, Any], strict: bool = False) -> None:
        """Patch the pod's status; with ``strict`` a failure other than a gone pod raises, so
        the caller can try again. A node that is down writes nothing."""
        if self.down.is_set():
            return
        try:
            self.core.patch_namespaced_pod_status(
                pod.metadata.name,
                pod.metadata.namespace,
                {"status": status},
                _request_timeout=STATUS_TIMEOUT_S,  # a call caught in an API restart is tried again
            )
        except ApiException as exc:
            if exc.status == 404:
                return
            if strict:
                raise
            log.error("status update of %s failed: %s", pod.metadata.name, exc)

    def shutdown(self) -> None:
        """Stop watching and SIGTERM every pod's processes; the pods stay in the API."""
        self.stopping.set()
        with self.lock:
            pods = list(self.pods.values())
        for pod in pods:
            signal_containers(pod.containers, signal.SIGTERM)


class KubeletArgs(NamedTuple):
    kubeconfig: Path
    node: LocalNode
    work_dir: Path
    pod_loopback: ipaddress.IPv4Network
    tls: KubeletTls
    heartbeat_seconds: float = HEARTBEAT_S


def parse_args(argv: list[str] | None = None) -> KubeletArgs:
    """The kubeconfig, the node this process plays, where its pods' files go, the cluster's pod
    loopback range (``addressplan``) and the log endpoint's certificates (``certs``)."""
    parser = argparse.ArgumentParser(description="Run pods of one node as local processes.")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--zone", required=True, help="the node's topology.kubernetes.io/zone")
    parser.add_argument("--pod-cidr", required=True, help="its pod IPs' range, in 10.200.0.0/16")
    parser.add_argument(
        "--register-with-taints", action="append", default=[], type=parse_taint, metavar="KEY[=VALUE]:EFFECT"
    )
    parser.add_argument("--pod-loopback", type=ipaddress.IPv4Network, required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--tls-cert-file", type=Path, required=True, help="serving certificate (logs)")
    parser.add_argument("--tls-private-key-file", type=Path, required=True)
    parser.add_argument("--client-ca-file", type=Path, required=True, help="CA of accepted clients")
    parser.add_argument(
        "--heartbeat-seconds", type=float, default=HEARTBEAT_S, help="how often the node's status is posted"
    )
    args = parser.parse_args(argv)
    node = LocalNode(args.node, args.zone, args.pod_cidr, taints=args.register_with_taints)
    tls = KubeletTls(args.tls_cert_file, args.tls_private_key_file, args.client_ca_file)
    return KubeletArgs(args.kubeconfig, node, args.work_dir, args.pod_loopback, tls, args.heartbeat_seconds)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kubelet = LocalKubelet(
        args.kubeconfig, args.node, args.work_dir, args.pod_loopback, args.tls, args.heartbeat_seconds
    )

    def stop(_sig: int, _frame: object) -> None:
        kubelet.shutdown()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    kubelet.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
