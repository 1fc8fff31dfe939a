"""Pods as containers on a real node: containerd and runc from Debian, a kubelet v1.36.3 built
from the module proxy, images built here (``mcp_devcluster.realnode``).

What only a container shows, asserted from inside it through ``kubectl logs``: the image's
non-root user, a read-only root filesystem, no capabilities, seccomp filtering, the service
account's token reaching the API server through the ``kubernetes`` Service, whose name cluster
DNS (CoreDNS) answers; and the memory limit enforced by the kernel, the container OOM-killed and
reported so by the kubelet. Then the operator as users install it: from its image by the Helm
chart, in the pod network, gating the samples of ``make demo`` (its benchmark's shards are
containers on the node too), its targets named by Service DNS names. And the README's path to
your own cluster, its commands read from the page: the images pushed to a registry on loopback
and pulled from it by the node.

The node joins a control plane of its own (no kwok, no process nodes), so nothing else of the
session lands on it. It needs root (containerd, runc, network links); without root it is
skipped with that reason.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import build, chaosmesh, demo, processes, readme, registry, stack
from mcp_devcluster.cluster import ClusterState, DevCluster
from mcp_devcluster.realnode import images, lifecycle, node, runtime
from mcp_devcluster.realnode.node import RealNodeState

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "manifests" / "samples"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the real node needs root (containerd, runc, links)"
)


REAL_NODE_TOLERATIONS = [{"key": "mcp2026.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]
REAL_NODE_SELECTOR = {"kubernetes.io/hostname": node.NODE_NAME}


@dataclass
class RealCluster:
    cluster: ClusterState
    node: RealNodeState

    @property
    def kubeconfig(self) -> Path:
        return Path(self.cluster.kubeconfig)

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> Any:
        """kubectl on the real cluster; a ``--timeout=Ns`` among the args (a rollout status, a
        wait) is kubectl's own to report, so the process gets that long and a minute more."""
        asked = [int(m[1]) for a in args if (m := re.fullmatch(r"--timeout=(\d+)s", a))]
        limit = max([120, *(seconds + 60 for seconds in asked)])
        return stack.kubectl(self.kubeconfig, *args, input_text=input_text, check=check, timeout=limit)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    # the API server listens on the node's address, so the kubernetes Service has an endpoint;
    # ClusterIPs come from the range routed to this machine, which pods on the bridge reach
    node.add_node_network()
    dev = DevCluster(
        tmp_path_factory.mktemp("realcluster"),
        nodes=[],
        local_nodes=[],
        api_address=node.NODE_IP,
        service_cidr=node.SERVICE_CIDR,
    )
    try:
        state = dev.up()
        node_state = lifecycle.up(Path(state.state_dir))
        print("real node startup:", json.dumps(node_state.startup_seconds))
        try:
            yield RealCluster(state, node_state)
        finally:
            lifecycle.down(Path(state.state_dir), keep_address=True)
    finally:
        dev.down()
        node.remove_node_network()


def _on_the_real_node(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    spec["nodeSelector"] = REAL_NODE_SELECTOR
    spec["tolerations"] = REAL_NODE_TOLERATIONS
    spec.setdefault("restartPolicy", "Never")
    for container in spec["containers"]:
        container.setdefault("imagePullPolicy", "Never")  # nothing is pulled: the image is local
    return pod


def _wait_pod(real: RealCluster, name: str, done: Any, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = real.kubectl("get", "pod", name, "-o", "json", check=False)
        if out.returncode == 0:
            pod = json.loads(out.stdout)
            if done(pod):
                return pod
        time.sleep(0.5)
    events = real.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", check=False)
    raise AssertionError(
        f"pod {name} not done in {timeout_s:.0f}s: {json.dumps(pod.get('status'))}\n{events.stdout}"
    )


def _finished(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


LOCKED_DOWN = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}

PROBE = """
import os, socket, ssl, urllib.request
print("uid", os.getuid())
try:
    open("/probe", "w")
except OSError as exc:
    print("rootfs", exc.strerror)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print("CapEff", status["CapEff"].strip(), "Seccomp", status["Seccomp"].strip())
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
print("dns", socket.gethostbyname("kubernetes.default.svc") == host)
req = urllib.request.Request(f"https://{host}:{port}/version", headers={"Authorization": "Bearer " + token})
print("api", urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca), timeout=10).status)
"""


def test_the_operator_image_runs_locked_down_and_reaches_the_api_with_its_token(real: RealCluster) -> None:
    pod = _on_the_real_node(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "locked-down", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "probe",
                        "image": real.node.images["operator"],
                        "command": ["python3", "-c", PROBE],
                        "securityContext": LOCKED_DOWN,
                    }
                ],
            },
        }
    )
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(pod))
    done = _wait_pod(real, "locked-down", _finished)
    logs = real.kubectl("logs", "locked-down").stdout
    assert done["status"]["phase"] == "Succeeded", logs
    assert done["spec"]["nodeName"] == node.NODE_NAME
    lines = dict(line.split(" ", 1) for line in logs.splitlines() if " " in line)
    assert lines["uid"] == "65532"  # the image's USER
    assert lines["rootfs"] == "Read-only file system"
    assert lines["CapEff"].startswith("0000000000000000") and lines["CapEff"].endswith("Seccomp 2")
    assert lines["api"] == "200"  # through the kubernetes Service's ClusterIP
    assert lines["dns"] == "True"  # kubernetes.default.svc answered with that ClusterIP


def test_a_container_past_its_memory_limit_is_oom_killed_and_reported(real: RealCluster) -> None:
    pod = _on_the_real_node(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "greedy", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "greedy",
                        "image": real.node.images["operator"],
                        "command": ["python3", "-c", "x = bytearray(512 * 2**20); print(len(x))"],
                        "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}},
                        "securityContext": LOCKED_DOWN,
                    }
                ],
            },
        }
    )
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(pod))
    done = _wait_pod(real, "greedy", _finished)
    (status,) = done["status"]["containerStatuses"]
    terminated = status["state"]["terminated"]
    assert done["status"]["phase"] == "Failed"
    assert terminated["reason"] == "OOMKilled" and terminated["exitCode"] == 137, terminated


REFSERVER_NAMESPACE = "mcp-refserver"


@pytest.fixture(scope="module")
def refserver_url(real: RealCluster) -> str:
    """manifests/refserver on the real node (one replica, in the pod network, locked down);
    its Service's URL by DNS name, as a user writes it."""
    namespace = REFSERVER_NAMESPACE
    real.kubectl("create", "namespace", namespace, check=False)
    deployment, service = (
        yaml.safe_load((REPO / "manifests" / "refserver" / f"{kind}.yaml").read_text())
        for kind in ("deployment", "service")
    )
    deployment["spec"]["replicas"] = 1
    pod = deployment["spec"]["template"]
    _on_the_real_node(pod)
    pod["spec"].pop("restartPolicy")  # a Deployment's pods restart
    (container,) = pod["spec"]["containers"]
    container["image"] = real.node.images["refserver"]
    container["securityContext"] = LOCKED_DOWN
    for item in (deployment, service):
        item["metadata"]["namespace"] = namespace
        real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(item))
    rollout = real.kubectl(
        "-n", namespace, "rollout", "status", "deployment/refserver", "--timeout=120s", check=False
    )
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr
    return f"http://refserver.{namespace}.svc:8080"


def _sample_on_the_real_node(text: str, url: str) -> str:
    """A sample of ``make demo`` pointed at the refserver Service by name, and its shards (if
    any) placed on the real node instead of the process node the demo uses, with requests that
    fit beside the operator and the server (the node is this machine: its real cores)."""
    doc = yaml.safe_load(stack.render_sample(text, url))
    runner = doc["spec"].get("runner")
    if runner is not None:
        runner.update(nodeSelector=REAL_NODE_SELECTOR, tolerations=REAL_NODE_TOLERATIONS)
        runner.update(cpu="250m", memory="256Mi")
    return yaml.safe_dump(doc)


def _in_namespace(text: str, namespace: str) -> str:
    """The object in ``namespace``: the kustomize base's operator works in its own only."""
    doc = yaml.safe_load(text)
    doc["metadata"]["namespace"] = namespace
    return yaml.safe_dump(doc)


def _keep_for_the_reader(real: RealCluster, namespace: str, deployment: str) -> str:
    """The operator's logs (and its pods' descriptions) into the state dir for a failure's
    reader; returns the current logs."""
    logs = real.kubectl("-n", namespace, "logs", f"deployment/{deployment}", check=False).stdout
    (Path(real.cluster.state_dir) / f"operator-logs-{namespace}.txt").write_text(
        logs
        + "\n--- previous ---\n"
        + real.kubectl("-n", namespace, "logs", f"deployment/{deployment}", "--previous", check=False).stdout
        + real.kubectl("-n", namespace, "describe", "pods", check=False).stdout
        + real.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        + real.kubectl("get", "mcpbenchmarks,mcpreadinesses,jobs", "-A", "-o", "yaml", check=False).stdout
        + real.kubectl("get", "events", "-A", check=False).stdout
    )
    return logs


def _benchmark_killed_at_its_memory_limit(real: RealCluster, url: str) -> dict[str, Any]:
    """The benchmark sample with one shard whose memory limit is below what Python needs to
    import the engine: the kernel kills it, and the verdict must say so, not lose it."""
    doc = yaml.safe_load(_sample_on_the_real_node((SAMPLES / "mcpbenchmark-refserver.yaml").read_text(), url))
    doc["metadata"]["name"] = "starved"
    doc["spec"]["shards"] = 1
    doc["spec"]["runner"].update(memory="32Mi", memoryLimit="32Mi", backoffLimit=0)
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(doc))
    waited = real.kubectl(
        "wait", "mcpbenchmark/starved", "--for=condition=Ready=false", "--timeout=180s", check=False
    )
    assert waited.returncode == 0, waited.stdout + waited.stderr
    obj: dict[str, Any] = json.loads(real.kubectl("get", "mcpbenchmark", "starved", "-o", "json").stdout)
    return obj


def test_the_chart_installs_the_operator_from_its_image_and_the_samples_pass(
    real: RealCluster, refserver_url: str
) -> None:
    """helm install on the real node (the chart's locked-down pod in the pod network, the
    operator's own ServiceAccount and RBAC); every sample of ``make demo`` reaches a Ready
    verdict through it (or, for the drill, the busy machine's Inconclusive), the benchmark's
    shards running as containers beside it; a shard killed at its memory limit ends its
    benchmark ``ShardFailed``, naming ``OOMKilled``; its JSON logs through ``kubectl logs``; a
    SIGTERM ends it well inside its grace period."""
    namespace = "mcp-system"
    real.kubectl("create", "namespace", namespace, check=False)
    repository, tag = real.node.images["operator"].rsplit(":", 1)
    grace_s = 30
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "watchNamespaces": ["default"],  # where the samples go: its Role there, nothing elsewhere
        "nodeSelector": REAL_NODE_SELECTOR,
        "tolerations": REAL_NODE_TOLERATIONS,
        "shutdownTimeoutSeconds": 20,
        "terminationGracePeriodSeconds": grace_s,
    }
    values_file = Path(real.cluster.state_dir) / "operator-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    helm = [str(build.binary("helm", "helm")), f"--kubeconfig={real.kubeconfig}", "--namespace", namespace]
    installed = subprocess.run(
        [
            *helm,
            "install",
            "ops",
            str(REPO / "charts" / "mcp-operator"),
            "-f",
            str(values_file),
            "--wait",
            "--timeout",
            "180s",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    try:
        outcomes = [
            demo.apply_and_wait(
                real.kubeconfig,
                path,
                lambda text: _sample_on_the_real_node(text, refserver_url),
                timeout_s=240,
            )
            for path in sorted(SAMPLES.glob("*.yaml"))
        ]
        starved = _benchmark_killed_at_its_memory_limit(real, refserver_url)
        logs = _keep_for_the_reader(real, namespace, "ops")
        assert len(outcomes) == 3
        # a drill the busy machine's load left Inconclusive (the client could not keep its rate)
        # is the machine's doing, as in the quick start; its own evidence must hold all the same
        undecided = [o for o in outcomes if o.ready != "True" and not o.busy_machine]
        assert not undecided, ([o.__dict__ for o in undecided], logs[-3000:])
        for busy in (o for o in outcomes if o.busy_machine):
            kpis = {k["name"]: k["verdict"] for k in busy.status["kpis"]}
            assert kpis["healthSuccessRatio"] == "Pass", busy.status
            assert [s["phase"] for s in busy.status["stages"]] == ["Done", "Done", "Done"], busy.status
        shards = json.loads(
            real.kubectl("get", "pods", "-l", "app.kubernetes.io/component=bench-shard", "-o", "json").stdout
        )["items"]
        assert shards and {p["spec"]["nodeName"] for p in shards} == {node.NODE_NAME}
        phases = {
            p["metadata"]["name"]: p["status"]["phase"]
            for p in shards
            if "starved" not in p["metadata"]["name"]
        }
        assert phases and set(phases.values()) == {"Succeeded"}, phases
        ready = stack.condition_of(starved)
        assert ready["reason"] == "ShardFailed", starved["status"]
        assert "OOMKilled (exit 137) at its memory limit 32Mi" in ready["message"], ready["message"]
        records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
        assert records and all({"time", "level", "message"} <= set(r) for r in records)
        (pod,) = json.loads(
            real.kubectl(
                "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/name=mcp-operator", "-o", "json"
            ).stdout
        )["items"]
        assert pod["spec"]["nodeName"] == node.NODE_NAME
        assert not pod["spec"].get("hostNetwork")
        began = time.monotonic()
        real.kubectl(
            "-n", namespace, "delete", "pod", pod["metadata"]["name"], "--wait=true", "--timeout=60s"
        )
        stopped_s = time.monotonic() - began
        assert stopped_s < grace_s, stopped_s  # it ended on SIGTERM, not SIGKILL at the grace period's end
    finally:
        subprocess.run([*helm, "uninstall", "ops", "--wait"], capture_output=True, check=False, timeout=120)


def _kustomize_overlay(real: RealCluster, root: Path, namespace: str) -> Path:
    """An overlay of manifests/base as a user writes one: their namespace (with the bindings
    moved along, as manifests/overlays/namespace shows), the image as built here (never pulled),
    the pod placed on the real node."""
    image = real.node.images["operator"]
    repository, tag = image.rsplit(":", 1)
    root.mkdir(parents=True, exist_ok=True)
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mcp-operator"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": REAL_NODE_SELECTOR,
                    "tolerations": REAL_NODE_TOLERATIONS,
                    "containers": [
                        {
                            "name": "operator",
                            "imagePullPolicy": "Never",
                            "env": [{"name": "MCP_RUNNER_IMAGE", "value": image}],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ],
                }
            }
        },
    }
    (root / "placement.yaml").write_text(yaml.safe_dump(patch))
    # the bindings' subjects follow the namespace as manifests/overlays/namespace makes them
    example = yaml.safe_load(
        (REPO / "manifests" / "overlays" / "namespace" / "kustomization.yaml").read_text()
    )
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": [os.path.relpath(REPO / "manifests" / "base", root)],
        "images": [{"name": "ghcr.io/mcp2026/mcp-operator", "newName": repository, "newTag": tag}],
        "patches": [{"path": "placement.yaml"}],
        "replacements": example["replacements"],
    }
    (root / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return root


def test_the_kustomize_base_runs_the_operator_from_its_image_and_it_gates_a_sample(
    real: RealCluster, refserver_url: str
) -> None:
    """``kubectl apply -k`` of an overlay of manifests/base: the Deployment becomes available on
    the real node (locked down, its own ServiceAccount, working in its own namespace only, in the
    pod network) and the readiness sample, applied in that namespace, reaches Ready True through
    it."""
    namespace = "mcp-kustomize"
    overlay = _kustomize_overlay(real, Path(real.cluster.state_dir) / "overlay", namespace)
    rendered = [d for d in yaml.safe_load_all(real.kubectl("kustomize", str(overlay)).stdout) if d]
    assert {d["metadata"]["name"] for d in rendered if d["kind"] == "Namespace"} == {namespace}
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == real.node.images["operator"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # everything but the CRDs goes away at the end (the chart's test may hold resources of theirs)
    owned = yaml.safe_dump_all([d for d in rendered if d["kind"] != "CustomResourceDefinition"])
    applied = real.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(overlay), check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    try:
        rollout = real.kubectl(
            "-n", namespace, "rollout", "status", "deployment/mcp-operator", "--timeout=180s", check=False
        )
        logs = _keep_for_the_reader(real, namespace, "mcp-operator")
        assert rollout.returncode == 0, rollout.stdout + rollout.stderr + logs[-3000:]
        outcome = demo.apply_and_wait(
            real.kubeconfig,
            SAMPLES / "mcpreadiness-refserver.yaml",
            lambda text: _in_namespace(_sample_on_the_real_node(text, refserver_url), namespace),
            timeout_s=180,
        )
        logs = _keep_for_the_reader(real, namespace, "mcp-operator")
        assert outcome.ready == "True", (outcome.__dict__, logs[-3000:])
        (pod,) = json.loads(
            real.kubectl(
                "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/name=mcp-operator", "-o", "json"
            ).stdout
        )["items"]
        assert pod["spec"]["nodeName"] == node.NODE_NAME and not pod["spec"].get("hostNetwork")
        assert pod["spec"]["serviceAccountName"] == "mcp-operator"
        assert outcome.name in logs  # this operator judged it
    finally:
        real.kubectl("delete", "-f", "-", "--wait=true", "--timeout=120s", input_text=owned, check=False)


# -- Chaos Mesh on the real node ---------------------------------------------------------------

OPT_IN = "mcp2026.io/fault-injection=enabled"
REFSERVER_LABELS = {"app.kubernetes.io/name": "refserver"}
CHAOS_HOLD_S = 3


@pytest.fixture(scope="module")
def chaos_mesh(real: RealCluster, refserver_url: str) -> Iterator[chaosmesh.ChaosMesh]:
    """Chaos Mesh's controller and daemon (built from the module proxy) as local processes, the
    daemon on the real node's containerd; stopped at the end, leaving nothing behind."""
    state_dir = Path(real.cluster.state_dir)
    mesh = chaosmesh.start_chaos_mesh(
        state_dir, real.kubeconfig, lifecycle._runtime_paths(state_dir).socket, node.NODE_NAME, node.NODE_IP
    )
    try:
        yield mesh
    finally:
        chaosmesh.stop_chaos_mesh(mesh)
        assert not _chaos_processes(), _chaos_processes()
        assert "/usr/local/bin" not in Path("/proc/mounts").read_text()


def _chaos_processes() -> str:
    return subprocess.run(
        ["pgrep", "-af", "chaos-(daemon|controller)"], capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def drilling_operator(real: RealCluster, chaos_mesh: chaosmesh.ChaosMesh) -> Iterator[stack.OperatorProcess]:
    """The operator as a process with the admin kubeconfig (rights to chaos-mesh.org objects),
    watching the refserver's namespace, which opts in to fault injection."""
    stack.apply_crds(real.kubeconfig, REPO / "crds")
    real.kubectl("label", "namespace", REFSERVER_NAMESPACE, OPT_IN, "--overwrite")
    operator = stack.start_operator(
        real.kubeconfig, Path(real.cluster.state_dir), namespaces=[REFSERVER_NAMESPACE]
    )
    try:
        yield operator
    finally:
        stack.stop(operator.process)


def _refserver_pod(real: RealCluster) -> dict[str, Any]:
    """The refserver's one pod (one going away after a pod-kill is not it)."""
    listed = json.loads(
        real.kubectl(
            "-n", REFSERVER_NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=refserver", "-o", "json"
        ).stdout
    )["items"]
    (pod,) = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
    return dict(pod)


def _pod_url(pod: dict[str, Any]) -> str:
    """The server's own address: the operator runs on this machine, outside cluster DNS."""
    (port,) = pod["spec"]["containers"][0]["ports"]
    return f"http://{pod['status']['podIP']}:{port['containerPort']}"


def _in_pod_network(real: RealCluster, pod: dict[str, Any], *command: str) -> str:
    """``command`` run in the pod's network namespace, found through its container's task."""
    container = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    paths = lifecycle._runtime_paths(Path(real.cluster.state_dir))
    tasks = [line.split() for line in runtime.ctr(paths, "tasks", "ls").splitlines()[1:]]
    pid = next(fields[1] for fields in tasks if fields[0] == container)
    return subprocess.run(
        ["nsenter", f"--net=/proc/{pid}/ns/net", "--", *command], capture_output=True, text=True, check=True
    ).stdout


def _chaos_rules(real: RealCluster, pod: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The pod's iptables rules that drop, and its ipsets (Chaos Mesh's partition uses both)."""
    rules = _in_pod_network(real, pod, "iptables-save").splitlines()
    sets = _in_pod_network(real, pod, "ipset", "list", "-n").split()
    return [r for r in rules if r.startswith("-A") and "DROP" in r], sets


def _chaos_drill(real: RealCluster, name: str, url: str, chaos: dict[str, Any]) -> dict[str, Any]:
    """One stage of load with the experiment injected at 2 s for 3 s; polls the experiment and
    the pod's rules while it runs; returns the finished MCPReadiness and what was seen."""
    stage = {
        "name": "chaos",
        "load": {"rate": 20, "durationSeconds": 10, "windowSeconds": 1},
        "faults": [{"kind": "chaosMesh", "atSeconds": 2, "holdSeconds": CHAOS_HOLD_S, "chaos": chaos}],
    }
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 20, "minSuccessRatio": 0.5, "maxProberLagMs": 2000}},
        "drill": {"kpis": {"healthSuccessRatio": 0.5}, "faultPolicy": {"maxPods": 1}, "stages": [stage]},
    }
    pod = _refserver_pod(real)
    kind = chaos["kind"].lower()
    real.kubectl(
        "-n",
        REFSERVER_NAMESPACE,
        "apply",
        "-f",
        "-",
        input_text=stack.custom_resource("MCPReadiness", name, spec),
    )
    seen: dict[str, Any] = {"conditions": set(), "phases": set(), "drops": []}
    deadline = time.monotonic() + 240
    while True:
        obj = json.loads(
            real.kubectl("-n", REFSERVER_NAMESPACE, "get", "mcpreadiness", name, "-o", "json").stdout
        )
        seen["phases"].update(f["phase"] for f in (obj.get("status") or {}).get("faults") or [])
        if stack.condition_of(obj, "Complete").get("status") == "True":
            return {"readiness": obj, **seen}
        assert time.monotonic() < deadline, json.dumps(obj.get("status"), indent=1)
        for item in json.loads(real.kubectl("-n", REFSERVER_NAMESPACE, "get", kind, "-o", "json").stdout)[
            "items"
        ]:
            seen["conditions"].update(
                c["type"] for c in item.get("status", {}).get("conditions") or [] if c.get("status") == "True"
            )
        if kind == "networkchaos" and not seen["drops"]:
            seen["drops"] = _chaos_rules(real, pod)[0]
        time.sleep(0.3)


def _experiment(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Every field spelled out: without Chaos Mesh's webhook nothing is defaulted."""
    selector = {"namespaces": [REFSERVER_NAMESPACE], "labelSelectors": REFSERVER_LABELS}
    return {
        "kind": kind,
        "injectTimeoutSeconds": 90,
        "recoverTimeoutSeconds": 90,
        "spec": {"mode": "all", "selector": selector, **spec},
    }


def _fault(obj: dict[str, Any]) -> dict[str, Any]:
    """The drill's one fault, held for its 3 s once in (the journal's times are whole seconds),
    however long Chaos Mesh took to report it injected."""
    faults = obj["status"].get("faults") or []
    assert len(faults) == 1, json.dumps(obj["status"], indent=1)[-4000:]
    fault = dict(faults[0])
    if fault.get("injectedAt") and fault.get("revertedAt"):
        held = _seconds_between(fault["injectedAt"], fault["revertedAt"])
        assert held >= CHAOS_HOLD_S - 1, (held, fault)
    return fault


def _seconds_between(earlier: str, later: str) -> float:
    def parse(stamp: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))

    return (parse(later) - parse(earlier)).total_seconds()


def _injected_reverted_and_available(
    real: RealCluster, run: dict[str, Any], chaos_mesh: chaosmesh.ChaosMesh
) -> dict[str, Any]:
    """The drill's fault went in (the experiment AllInjected) and was reverted, and the
    refserver's Deployment is available again; the fault's journal entry."""
    fault = _fault(run["readiness"])
    assert fault["phase"] == "Reverted" and fault["injectedAt"], fault
    assert "AllInjected" in run["conditions"], (run["conditions"], chaos_mesh.log_tails()[-3000:])
    rollout = real.kubectl(
        "-n", REFSERVER_NAMESPACE, "rollout", "status", "deployment/refserver", "--timeout=180s", check=False
    )
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr
    return fault


def test_a_drill_partitions_the_refserver_through_chaos_mesh_and_it_answers_again(
    real: RealCluster, drilling_operator: stack.OperatorProcess, chaos_mesh: chaosmesh.ChaosMesh
) -> None:
    """A NetworkChaos partition (both directions) of the refserver's pod, by the drill's
    chaosMesh fault: injected (AllInjected, DROP rules in the pod's network namespace), the
    stage's requests failing while it holds, reverted (deleted, rules gone), the server
    answering again."""
    pod = _refserver_pod(real)
    url = _pod_url(pod)
    chaos = _experiment("NetworkChaos", {"action": "partition", "direction": "both"})
    run = _chaos_drill(real, "partition", url, chaos)
    obj = run["readiness"]
    fault = _fault(obj)
    print(
        "partition drill:", json.dumps({k: obj["status"][k] for k in ("faults", "stages", "kpis")}, indent=1)
    )
    assert {"Injected", "Reverted"} <= run["phases"] | {fault["phase"]}, (run["phases"], fault)
    assert fault["phase"] == "Reverted" and fault["injectedAt"] and fault["revertedAt"], fault
    assert "AllInjected" in run["conditions"], (run["conditions"], chaos_mesh.log_tails()[-3000:])
    assert run["drops"], "no DROP rule was seen in the pod's network namespace while the fault held"
    (stage,) = obj["status"]["stages"]
    windows = stage["windows"]
    kpis = {k["name"]: k for k in obj["status"]["kpis"]}
    failed = sum(w["errors"] for w in windows)
    assert failed > 0 or not kpis["healthSuccessRatio"]["measured"].startswith("100"), (windows, kpis)
    assert windows[-1]["completed"] > 0 and windows[-1]["errors"] == 0, windows
    # the drill measured the outage the partition caused and the recovery after its revert
    recovery = {k["fault"]: k for k in obj["status"]["kpis"] if k["name"] == "recoverySeconds"}
    assert recovery[fault["id"]]["measured"].endswith(" s"), recovery
    print(f"NetworkChaos partition: recovery {recovery[fault['id']]['measured']} after the 3 s hold")
    assert real.kubectl("-n", REFSERVER_NAMESPACE, "get", "networkchaos", "-o", "name").stdout == ""
    # recovery empties CHAOS-INPUT/-OUTPUT (the only jumps into Chaos Mesh's chains); like the
    # upstream daemon it leaves the experiment's own chains behind, unreferenced
    rules = _in_pod_network(real, _refserver_pod(real), "iptables-save").splitlines()
    assert [r for r in rules if r.startswith(("-A CHAOS-", "-A INPUT -j CHAOS", "-A OUTPUT -j CHAOS"))] in (
        [],
        ["-A INPUT -j CHAOS-INPUT", "-A OUTPUT -j CHAOS-OUTPUT"],
    ), rules
    assert _chaos_rules(real, _refserver_pod(real))[1] == []
    assert processes.http_ok(f"{url}/v2/health/ready", timeout=5)


def test_a_drill_kills_the_refserver_container_through_chaos_mesh_and_it_restarts(
    real: RealCluster, drilling_operator: stack.OperatorProcess, chaos_mesh: chaosmesh.ChaosMesh
) -> None:
    """A PodChaos container-kill of the refserver's container: containerd kills it through the
    daemon, the kubelet restarts it, the Deployment is available again."""
    before = _refserver_pod(real)
    restarts = before["status"]["containerStatuses"][0]["restartCount"]
    url = _pod_url(before)
    chaos = _experiment("PodChaos", {"action": "container-kill", "containerNames": ["server"]})
    run = _chaos_drill(real, "container-kill", url, chaos)
    _injected_reverted_and_available(real, run, chaos_mesh)
    after = _refserver_pod(real)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # the same pod: its container restarted
    assert after["status"]["containerStatuses"][0]["restartCount"] > restarts, after["status"]
    assert real.kubectl("-n", REFSERVER_NAMESPACE, "get", "podchaos", "-o", "name").stdout == ""


def test_a_drill_kills_the_refserver_pod_through_chaos_mesh_and_the_deployment_replaces_it(
    real: RealCluster, drilling_operator: stack.OperatorProcess, chaos_mesh: chaosmesh.ChaosMesh
) -> None:
    """A PodChaos pod-kill of the refserver's pod, through its Service (the pod's own address
    goes with it): the controller deletes the pod, the Deployment replaces it, the drill sees
    the outage and the recovery."""
    before = _refserver_pod(real)
    service = json.loads(
        real.kubectl("-n", REFSERVER_NAMESPACE, "get", "service", "refserver", "-o", "json").stdout
    )
    url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
    chaos = _experiment("PodChaos", {"action": "pod-kill", "gracePeriod": 0})
    run = _chaos_drill(real, "pod-kill", url, chaos)
    fault = _injected_reverted_and_available(real, run, chaos_mesh)
    after = _refserver_pod(real)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]  # a new pod in its place
    recovery = {k["fault"]: k for k in run["readiness"]["status"]["kpis"] if k["name"] == "recoverySeconds"}
    print(f"PodChaos pod-kill: recovery {recovery[fault['id']]['measured']}")
    assert real.kubectl("-n", REFSERVER_NAMESPACE, "get", "podchaos", "-o", "name").stdout == ""


# The README's path runs last in this module: the node then holds the reference server's image
# under a registry's name too (pulled, the same image id), and the kubelet afterwards found the
# harness's imported tag missing (ErrImageNeverPull) when a chaos test restarted the container.

# -- README, "In your own cluster": its own commands, through a registry ------------------------

README_REGISTRY = "registry.example.com"


@dataclass(frozen=True)
class Edit:
    """One change the test makes to the README's commands, and why; each must match."""

    old: str
    new: str
    why: str


def _edits(registry_host: str, root: Path, node_values: Path, refserver_overlay: Path) -> list[Edit]:
    """Everything that differs from the page, named: the rest of each command runs as written."""
    return [
        Edit(README_REGISTRY, registry_host, "the registry: Debian's docker-registry on loopback, HTTP"),
        Edit(
            "make image ",
            f"make image IMAGE_DIR={root / 'images'} ",
            "the archives (about 1.3 GB) in the test's directory, not the checkout's .out/images",
        ),
        Edit(
            "--set image.tag=0.1.0",
            f"--set image.tag=0.1.0 -f {node_values}",
            "the real node's taint toleration and node selector, which a user's nodes do not need",
        ),
        Edit(
            "-k manifests/refserver-cluster",
            f"-k {refserver_overlay}",
            "the user's edit of its kustomization.yaml (their registry), as an overlay that also "
            "places the pods on the real node",
        ),
    ]


def _as_run_here(commands: list[str], edits: list[Edit]) -> list[str]:
    text = "\n".join(commands)
    for edit in edits:
        assert edit.old in text, f"README's block no longer holds {edit.old!r} ({edit.why}):\n{text}"
        text = text.replace(edit.old, edit.new)
    return text.split("\n")


def _refserver_overlay(root: Path, registry_host: str) -> Path:
    """manifests/refserver-cluster with the user's one edit (their registry for the image), and
    the real node's placement as a patch; the namespace stays the kubeconfig's, as the user's."""
    root.mkdir(parents=True)
    placement = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "refserver"},
                 "spec": {"template": {"spec": {"nodeSelector": REAL_NODE_SELECTOR,
                                                "tolerations": REAL_NODE_TOLERATIONS}}}}  # fmt: skip
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "manifests" / "refserver-cluster", root)],
        "images": [
            {
                "name": f"{README_REGISTRY}/mcp-refserver",
                "newName": f"{registry_host}/mcp-refserver",
            }
        ],
        "patches": [
            {"target": {"kind": "Deployment", "name": "refserver"}, "patch": yaml.safe_dump(placement)}
        ],
    }
    (root / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return root


def _container_statuses(real: RealCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    pods = json.loads(
        real.kubectl(
            "-n", namespace, "get", "pods", "-l", f"app.kubernetes.io/name={name}", "-o", "json"
        ).stdout
    )["items"]
    return [
        s
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        for s in p["status"]["containerStatuses"]
    ]


# make image builds again what changed since the node's images were built (minutes), then docker
# save, load and push move about 1.3 GB each: more than the default 600 s on a busy machine
@pytest.mark.timeout(1800)
def test_the_readmes_path_to_your_own_cluster(real: RealCluster, tmp_path: Path) -> None:
    """README, "In your own cluster", its commands read from the page and run by bash on the real
    node's cluster: ``make image`` loads both images into your Docker (a Docker daemon of the
    harness's with its data here, ``DOCKER_HOST``), ``docker push`` sends them to a registry
    (Debian's docker-registry on loopback), ``helm install --set image.repository/tag`` installs
    the operator, which the node's containerd pulls from that registry, and so the reference
    server of ``kubectl apply -k manifests/refserver-cluster``; ``mcp-check gate`` passes. What
    differs from the page is named in ``_edits``."""
    commands = readme.commands(readme.shell_block("In your own cluster"))
    paths = lifecycle._runtime_paths(Path(real.cluster.state_dir))
    docker = images.BuildDaemon(runtime.short_run_dir(tmp_path, "docker"), data_root=tmp_path / "docker")
    node_values = tmp_path / "node.yaml"
    node_values.write_text(
        yaml.safe_dump({"nodeSelector": REAL_NODE_SELECTOR, "tolerations": REAL_NODE_TOLERATIONS})
    )
    hub = registry.start(tmp_path / "registry")
    hosts: Path | None = None
    overlay = _refserver_overlay(tmp_path / "refserver-cluster", hub.host)
    env = {
        **os.environ,
        "PATH": os.pathsep.join(
            [str(build.binary("helm", "helm").parent), str(stack.kubectl_path().parent), os.environ["PATH"]]
        ),
        "KUBECONFIG": str(real.kubeconfig),
        "DOCKER_HOST": docker.host,
        "MAKEFLAGS": "",
    }
    ran: dict[str, str] = {}  # command as run → its output
    try:
        docker.start()
        hosts = runtime.trust_http_registry(paths, hub.host)
        for command in _as_run_here(commands, _edits(hub.host, tmp_path, node_values, overlay)):
            began = time.monotonic()
            result = subprocess.run(
                ["bash", "-c", command],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=1500,
                check=False,
            )
            print(f"{time.monotonic() - began:6.1f} s  {command}")
            ran[command] = result.stdout
            assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        logs = _keep_for_the_reader(real, "mcp-system", "mcp-operator")
        # make image loaded both into your Docker, and docker push sent what the registry serves
        (made,) = [out for command, out in ran.items() if command.startswith("make image")]
        pushed = {}
        for name in ("mcp-operator", "mcp-refserver"):
            assert f"{hub.host}/{name}:0.1.0: loaded into your Docker" in made, made
            digest = hub.manifest_digest(name, "0.1.0")
            assert digest and digest.startswith("sha256:"), digest
            pushed[name] = digest
            push = ran[f"docker push {hub.host}/{name}:0.1.0"]
            assert f"0.1.0: digest: {digest}" in push, push
        # the node pulled both from the registry: the pods run the pushed manifests
        (operator,) = _container_statuses(real, "mcp-system", "mcp-operator")
        assert operator["image"] == f"{hub.host}/mcp-operator:0.1.0", operator
        assert operator["imageID"] == f"{hub.host}/mcp-operator@{pushed['mcp-operator']}", operator
        servers = _container_statuses(real, "default", "refserver")
        assert len(servers) == 2 and all(s["ready"] for s in servers), servers
        assert {s["imageID"] for s in servers} == {f"{hub.host}/mcp-refserver@{pushed['mcp-refserver']}"}
        deployment = json.loads(
            real.kubectl("-n", "mcp-system", "get", "deployment", "mcp-operator", "-o", "json").stdout
        )
        assert deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] != "Never"
        # the verdict the user reads
        (gate,) = [out for command, out in ran.items() if command.startswith(".venv/bin/mcp-check gate")]
        print(gate)
        assert "Pass" in gate or "Warn" in gate, gate
        # applied with the Deployment, it judged the server only once its rollout had settled
        assert "RolloutSettled" in gate and "2/2 updated" in gate, gate
        assert "refserver-incluster" in logs  # the chart's operator judged it
    finally:
        real.kubectl("delete", "-k", str(overlay), "--wait=true", "--timeout=120s", check=False)
        helm = [str(build.binary("helm", "helm")), f"--kubeconfig={real.kubeconfig}", "-n", "mcp-system"]
        subprocess.run(
            [*helm, "uninstall", "mcp-operator", "--wait"], capture_output=True, timeout=120, check=False
        )
        real.kubectl("delete", "namespace", "mcp-system", "--wait=true", "--timeout=120s", check=False)
        if hosts is not None:
            hosts.unlink()
        docker.stop()
        registry.stop(hub)
        for mounted in (docker.run_dir, tmp_path / "docker"):
            node.unmount_under(mounted)
        for bulky in ("docker", "images", "registry/storage"):  # gigabytes: the logs stay
            shutil.rmtree(tmp_path / bulky, ignore_errors=True)
        shutil.rmtree(docker.run_dir, ignore_errors=True)
