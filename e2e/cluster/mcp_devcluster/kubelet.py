"""A kubelet for one node whose pods run as local processes.

There is no container runtime here, so the image is ignored and each container's command
and args run directly on this machine, with the pod's env (fieldRef, configMap and secret
references, ``$(VAR)`` expansion) and a kubeconfig holding a token for the pod's service
account, obtained through the TokenRequest API, so RBAC applies as it would in a cluster.
The pod goes Running, then Succeeded or Failed with exit codes and a termination message,
reported through the API as a kubelet would. A pod's termination message file is remapped:
the path is in ``MCP_TERMINATION_MESSAGE_PATH``; ``FallbackToLogsOnError`` uses the log tail.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from .certs import kubeconfig_dict, write_kubeconfig
from .nodes import api_client
from .podenv import ContainerSpecError, PodEnvironment, expand_refs

log = logging.getLogger("mcp_devcluster.kubelet")

MESSAGE_LIMIT = 4096
FALLBACK_LINES = 80
HEARTBEAT_S = 10.0


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunningContainer:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    message_path: Path
    message_policy: str
    started_at: str


@dataclass
class RunningPod:
    namespace: str
    name: str
    uid: str
    containers: list[RunningContainer] = field(default_factory=list)
    deleted: bool = False


class LocalKubelet:
    def __init__(self, kubeconfig: Path, node: str, work_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.node = node
        self.work_dir = work_dir
        self.api = api_client(kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.environment = PodEnvironment(self.core)
        self.pods: dict[str, RunningPod] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        cfg = self.api.configuration
        self.server: str = cfg.host
        self.ca_file: str = cfg.ssl_ca_cert

    # -- node ------------------------------------------------------------------------------
    def register_node(self) -> None:
        resources = {"cpu": str(os.cpu_count() or 2), "memory": "16Gi", "pods": "110"}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node,
                "labels": {
                    "kubernetes.io/hostname": self.node,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "mcp2026.io/local-runner": "true",
                },
            },
            "status": {"capacity": resources, "allocatable": resources},
        }
        try:
            self.core.create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        self.heartbeat()

    def heartbeat(self) -> None:
        stamp = now_iso()
        self.core.patch_node_status(
            self.node,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "local process runner is posting ready status",
                            "lastHeartbeatTime": stamp,
                            "lastTransitionTime": stamp,
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": self.node},
                    ],
                    "nodeInfo": {
                        "kubeletVersion": "mcp-local-runner",
                        "containerRuntimeVersion": "local-process://",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                        "kernelVersion": "",
                        "osImage": "",
                        "machineID": "",
                        "systemUUID": "",
                        "bootID": "",
                        "kubeProxyVersion": "",
                    },
                }
            },
        )

    def _heartbeat_loop(self) -> None:
        while not self.stopping.wait(HEARTBEAT_S):
            try:
                self.heartbeat()
            except Exception:
                log.exception("node heartbeat failed")

    # -- pods ------------------------------------------------------------------------------
    def run(self) -> None:
        self.register_node()
        threading.Thread(target=self._heartbeat_loop, daemon=True, name="heartbeat").start()
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
                    timeout_seconds=60,
                )
                for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.sync(event["object"])
                    if self.stopping.is_set():
                        break
            except Exception:
                log.exception("pod watch failed; relisting")
                time.sleep(1)

    def sync(self, pod: client.V1Pod) -> None:
        uid = pod.metadata.uid
        with self.lock:
            running = self.pods.get(uid)
        if pod.metadata.deletion_timestamp is not None:
            self._delete(pod, running)
            return
        if running is not None:
            self._sync_ready(pod)
            return
        if pod.status.phase in ("Succeeded", "Failed"):
            return
        try:
            self._start(pod)
        except ContainerSpecError as exc:
            self._report_unrunnable(pod, str(exc))
        except Exception as exc:
            log.exception("starting %s/%s failed", pod.metadata.namespace, pod.metadata.name)
            self._report_unrunnable(pod, f"local runner could not start the pod: {exc}")

    def _start(self, pod: client.V1Pod) -> None:
        ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
        pod_dir = self.work_dir / f"{ns}_{name}_{uid[:8]}"
        pod_dir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self._pod_kubeconfig(pod, pod_dir)
        running = RunningPod(ns, name, uid)
        for spec in pod.spec.containers:
            if not spec.command and not spec.args:
                raise ContainerSpecError(
                    f"container {spec.name!r} has no command: the local runner cannot use image entrypoints"
                )
            env = self.environment.container_env(pod, spec)
            env["KUBECONFIG"] = str(kubeconfig)
            message_path = pod_dir / f"{spec.name}.termination-log"
            message_path.write_text("")
            env["MCP_TERMINATION_MESSAGE_PATH"] = str(message_path)
            argv = [expand_refs(part, env) for part in [*(spec.command or []), *(spec.args or [])]]
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
            running.containers.append(
                RunningContainer(
                    spec.name,
                    proc,
                    log_path,
                    message_path,
                    spec.termination_message_policy or "File",
                    now_iso(),
                )
            )
        with self.lock:
            self.pods[uid] = running
        self._report_running(pod, running)
        threading.Thread(target=self._wait, args=(pod, running), daemon=True, name=f"pod-{name}").start()

    def _wait(self, pod: client.V1Pod, running: RunningPod) -> None:
        codes = [c.proc.wait() for c in running.containers]
        if running.deleted:
            return
        phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        statuses = [
            self._terminated_status(pod, c, code) for c, code in zip(running.containers, codes, strict=True)
        ]
        stamp = now_iso()
        conditions = [
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp},
            {
                "type": "ContainersReady",
                "status": "False",
                "reason": "PodCompleted",
                "lastTransitionTime": stamp,
            },
        ]
        self._patch_status(pod, {"phase": phase, "containerStatuses": statuses, "conditions": conditions})

    def _terminated_status(self, pod: client.V1Pod, c: RunningContainer, code: int) -> dict[str, Any]:
        message = c.message_path.read_text(errors="replace")[:MESSAGE_LIMIT]
        if not message and code != 0 and c.message_policy == "FallbackToLogsOnError":
            lines = c.log_path.read_text(errors="replace").splitlines()[-FALLBACK_LINES:]
            message = "\n".join(lines)[-2048:]
        terminated: dict[str, Any] = {
            "exitCode": code if code >= 0 else 128 - code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": c.started_at,
            "finishedAt": now_iso(),
        }
        if code < 0:
            terminated["signal"] = -code
        if message:
            terminated["message"] = message
        return {
            "name": c.name,
            "image": self._image(pod, c.name),
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {"terminated": terminated},
        }

    def _delete(self, pod: client.V1Pod, running: RunningPod | None) -> None:
        """Stop the pod's processes (on their own thread: a grace period must not hold up the
        watch), then remove the pod, as a kubelet does once its containers are gone."""
        if running is None:
            self._remove(pod)
        elif not running.deleted:
            running.deleted = True
            threading.Thread(target=self._terminate, args=(pod, running), daemon=True).start()

    def _terminate(self, pod: client.V1Pod, running: RunningPod) -> None:
        grace = pod.metadata.deletion_grace_period_seconds or 0
        for c in running.containers:
            _signal_group(c.proc, signal.SIGTERM)
        deadline = time.monotonic() + max(grace, 1)
        for c in running.containers:
            try:
                c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(c.proc, signal.SIGKILL)
                c.proc.wait()
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
    def _sync_ready(self, pod: client.V1Pod) -> None:
        """A running pod's Ready follows its readiness gates, as the kubelet's status manager does."""
        if not pod.spec.readiness_gates or pod.status.phase != "Running":
            return
        wanted = ready_condition(pod, now_iso())
        current = next((c for c in pod.status.conditions or [] if c.type == "Ready"), None)
        if current is None or current.status != wanted["status"]:
            self._patch_status(pod, {"conditions": [wanted]})

    def _report_running(self, pod: client.V1Pod, running: RunningPod) -> None:
        stamp = now_iso()
        statuses = [
            {
                "name": c.name,
                "image": self._image(pod, c.name),
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": c.started_at}},
            }
            for c in running.containers
        ]
        conditions = [
            {"type": t, "status": "True", "lastTransitionTime": stamp}
            for t in ("Initialized", "ContainersReady")
        ]
        conditions.append(ready_condition(pod, stamp))
        self._patch_status(
            pod,
            {
                "phase": "Running",
                "hostIP": "127.0.0.1",
                "podIP": "127.0.0.1",
                "podIPs": [{"ip": "127.0.0.1"}],
                "hostIPs": [{"ip": "127.0.0.1"}],
                "startTime": stamp,
                "containerStatuses": statuses,
                "conditions": conditions,
            },
        )

    def _report_unrunnable(self, pod: client.V1Pod, message: str) -> None:
        statuses = [
            {
                "name": spec.name,
                "image": spec.image or "",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 128,
                        "reason": "StartError",
                        "message": message,
                        "startedAt": now_iso(),
                        "finishedAt": now_iso(),
                    }
                },
            }
            for spec in pod.spec.containers
        ]
        self._patch_status(
            pod,
            {"phase": "Failed", "reason": "StartError", "message": message, "containerStatuses": statuses},
        )

    def _patch_status(self, pod: client.V1Pod, status: dict[str, Any]) -> None:
        try:
            self.core.patch_namespaced_pod_status(
                pod.metadata.name, pod.metadata.namespace, {"status": status}
            )
        except ApiException as exc:
            if exc.status != 404:
                log.error("status update of %s failed: %s", pod.metadata.name, exc)

    @staticmethod
    def _image(pod: client.V1Pod, container: str) -> str:
        return next((c.image or "" for c in pod.spec.containers if c.name == container), "")

    # -- environment -----------------------------------------------------------------------
    def _pod_kubeconfig(self, pod: client.V1Pod, pod_dir: Path) -> Path:
        """A kubeconfig with a bound token of the pod's service account, as a projected token would be."""
        account = pod.spec.service_account_name or "default"
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[],
                expiration_seconds=3600,
                bound_object_ref=client.V1BoundObjectReference(
                    kind="Pod", api_version="v1", name=pod.metadata.name, uid=pod.metadata.uid
                ),
            )
        )
        token = self.core.create_namespaced_service_account_token(account, pod.metadata.namespace, request)
        path = pod_dir / "kubeconfig"
        write_kubeconfig(
            path,
            kubeconfig_dict(
                self.server,
                Path(self.ca_file),
                user=f"system:serviceaccount:{pod.metadata.namespace}:{account}",
                token=token.status.token,
                namespace=pod.metadata.namespace,
            ),
        )
        return path

    def shutdown(self) -> None:
        self.stopping.set()
        with self.lock:
            pods = list(self.pods.values())
        for pod in pods:
            for c in pod.containers:
                _signal_group(c.proc, signal.SIGTERM)


def ready_condition(pod: client.V1Pod, stamp: str) -> dict[str, str]:
    """Ready for a pod whose containers run: True only when every readiness gate's condition is
    True (the reason and message follow the kubelet's wording)."""
    present = {c.type: c.status for c in pod.status.conditions or []}
    for gate in pod.spec.readiness_gates or []:
        if present.get(gate.condition_type) != "True":
            missing = gate.condition_type not in present
            what = "does not exist" if missing else "is not True"
            return {
                "type": "Ready",
                "status": "False",
                "reason": "ReadinessGatesNotReady",
                "message": f'corresponding condition of pod readiness gate "{gate.condition_type}" {what}.',
                "lastTransitionTime": stamp,
            }
    return {"type": "Ready", "status": "True", "lastTransitionTime": stamp}


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(proc.pid), sig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run pods of one node as local processes.")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kubelet = LocalKubelet(args.kubeconfig, args.node, args.work_dir)

    def stop(_sig: int, _frame: object) -> None:
        kubelet.shutdown()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    kubelet.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
