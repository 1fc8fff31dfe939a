"""Release gating through a real Argo CD: its own application controller and repo server (built
from the Go module proxy, with its own CRDs and default settings), Redis, and a Git server on
loopback that the test pushes releases to, against the real API server, controller manager,
local kubelet, service proxy and operator.

The release is the Helm chart of ``mcp_devcluster.releases.chart``: the reference server's
Deployment and Service (wave 0), the MCPReadiness of ``manifests/argocd/postsync-gate.yaml``
(wave 10, ``spec.release`` set from ``$ARGOCD_APP_REVISION``), its PostSync hook and the SyncFail
hook of ``syncfail-gate.yaml``, as written (a nodeSelector added so the local kubelet runs the
Jobs). The health checks of ``manifests/argocd`` are installed into Argo CD's argocd-cm the way
the docs say. An automated Application follows ``main``; after each push the test asks Argo CD
to refresh, as a Git webhook would (Argo CD polls every 3 minutes otherwise).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from mcp_checks.config import ArgoApplicationRef, ConfigConsistencySpec, run_config_consistency
from mcp_checks.verdict import Verdict
from mcp_devcluster import argocd, releases, stack
from mcp_devcluster.cluster import ClusterState

APP_TIMEOUT_S = 420


@pytest.fixture(scope="module")
def argo(
    cluster: ClusterState, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[argocd.ArgoCD]:
    running = argocd.start_argocd(tmp_path_factory.mktemp("argocd"), kubeconfig, cluster.server)
    try:
        yield running
    finally:
        argocd.stop_argocd(running)
        print(running.log_tails())


HELM_PARAMETERS = [
    {"name": "release", "value": "$ARGOCD_APP_REVISION", "forceString": True},
    {"name": "application", "value": "$ARGOCD_APP_NAME", "forceString": True},
]
# what docs/release-gating.md recommends with a gate: no automated retries of a failed sync (the
# default, 5 with a backoff from 5 s, spends about 6 minutes re-applying a release the gate failed)
NO_RETRY = {"limit": 0}


def application(
    argo: argocd.ArgoCD, name: str, repo: str, namespace: str, helm: bool = True
) -> dict[str, Any]:
    """An automated Application of what is at the root of ``repo``'s ``main``. A chart gets the
    values ``release`` (the revision Argo CD syncs), ``application`` and ``applicationNamespace``
    (its own name and namespace), the first two from
    Argo CD's build environment (forceString: a commit SHA of digits and one "e" would otherwise
    be a number to Helm)."""
    source: dict[str, Any] = {"repoURL": argo.repo_url(repo), "targetRevision": "main", "path": "."}
    if helm:
        # Argo CD's build environment names no Application namespace (ARGOCD_APP_NAMESPACE is
        # the destination's): it is written out
        namespace_parameter = {"name": "applicationNamespace", "value": argo.namespace}
        source["helm"] = {"parameters": [*HELM_PARAMETERS, namespace_parameter]}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": argo.namespace},
        "spec": {
            "project": "default",
            "source": source,
            "destination": {"server": argo.server, "namespace": namespace},
            "syncPolicy": {"automated": {}, "retry": NO_RETRY},
        },
    }


def get_app_or_none(argo: argocd.ArgoCD, name: str) -> dict[str, Any] | None:
    found = stack.kubectl(
        argo.kubeconfig, "-n", argo.namespace, "get", "application", name, "-o", "json", check=False
    )
    return json.loads(found.stdout) if found.returncode == 0 else None


def get_app(argo: argocd.ArgoCD, name: str) -> dict[str, Any]:
    out = stack.kubectl(
        argo.kubeconfig, "-n", argo.namespace, "get", "application", name, "-o", "json"
    ).stdout
    app: dict[str, Any] = json.loads(out)
    return app


def refresh(argo: argocd.ArgoCD, name: str) -> None:
    """What Argo CD's Git webhook does on a push: ask for the Application to be compared again."""
    stack.kubectl(
        argo.kubeconfig, "-n", argo.namespace, "annotate", "--overwrite", "application", name,
        "argocd.argoproj.io/refresh=normal",
    )  # fmt: skip


def operation(app: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = (app.get("status") or {}).get("operationState") or {}
    return state


def explain(app: dict[str, Any]) -> str:
    """What an assertion on a sync prints: its phase and message, and each resource's result."""
    state = operation(app)
    rows = [
        f"{r.get('kind')}/{r.get('name')}: {r.get('status')} {r.get('hookType', '')} {r.get('hookPhase')} "
        f"{r.get('message', '')}"
        for r in (state.get("syncResult") or {}).get("resources") or []
    ]
    return "\n".join([f"{state.get('phase')}: {state.get('message')}", *rows])


def operation_revision(app: dict[str, Any]) -> str | None:
    state = operation(app)
    return ((state.get("syncResult") or {}).get("revision")) or (
        (state.get("operation") or {}).get("sync") or {}
    ).get("revision")


def gate_status(kube: Any) -> dict[str, Any] | None:
    """The gate's status, or None before Argo CD created it."""
    found = kube.run("get", "mcpreadiness", releases.GATE, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    status: dict[str, Any] = json.loads(found.stdout).get("status") or {}
    return status


@dataclass
class Timeline:
    """What a 100 ms poll saw of one release: when its sync started and ended, the gate's
    verdict, and every health Argo CD's resource tree gave the MCPReadiness."""

    pushed: float
    started: float | None = None
    verdict: float | None = None
    finished: float | None = None
    phase: str | None = None
    gate_health: list[str] = field(default_factory=list)

    def row(self) -> str:
        def since(t: float | None) -> str:
            return "-" if t is None else f"{t - self.pushed:.1f}s"

        return (
            f"sync started {since(self.started)}, gate verdict {since(self.verdict)}, "
            f"sync {self.phase} {since(self.finished)} after the push; "
            f"MCPReadiness health seen: {' → '.join(self.gate_health)}"
        )


def follow(
    argo: argocd.ArgoCD, kube: Any, app_name: str, revision: str, pushed: float
) -> tuple[Timeline, dict[str, Any]]:
    """Poll the Application, its resource tree and the gate until the sync of ``revision`` ends."""
    line = Timeline(pushed)
    deadline = time.monotonic() + APP_TIMEOUT_S
    app: dict[str, Any] = {}
    while time.monotonic() < deadline:
        app = get_app(argo, app_name)
        state = operation(app)
        now = time.monotonic()
        if operation_revision(app) == revision and line.started is None:
            line.started = now
        health = argocd.tree_health(argocd.resource_tree(argo, app_name)).get(f"MCPReadiness/{releases.GATE}")
        if line.started is not None and health and (not line.gate_health or line.gate_health[-1] != health):
            line.gate_health.append(health)
        gate = (gate_status(kube) or {}).get("release") or {}
        if line.verdict is None and gate.get("revision") == revision and gate.get("completedAt"):
            line.verdict = now
        if line.started is not None and state.get("phase") in ("Succeeded", "Failed", "Error"):
            line.finished, line.phase = now, state["phase"]
            return line, app
        time.sleep(0.1)
    seen = json.dumps(app.get("status"))[:3000]
    raise AssertionError(f"the sync of {revision} did not end in {APP_TIMEOUT_S}s: {seen}")


def job_outcome(kube: Any, name: str) -> tuple[str | None, str | None]:
    """A hook Job's final condition and the Argo CD release it ran for (its RELEASE)."""
    found = kube.run("get", "job", name, "-o", "json", check=False)
    if found.returncode != 0:
        return None, None
    job = json.loads(found.stdout)
    ended = [
        c["type"]
        for c in (job.get("status") or {}).get("conditions") or []
        if c["type"] in ("Complete", "Failed") and c["status"] == "True"
    ]
    env = job["spec"]["template"]["spec"]["containers"][0].get("env") or []
    release = next((v["value"] for v in env if v["name"] == "RELEASE"), None)
    return (ended[0] if ended else "Running"), release


def wait_job(kube: Any, name: str, release: str, timeout_s: float = 180) -> str:
    def ended() -> str | None:
        condition, ran_for = job_outcome(kube, name)
        return condition if ran_for == release and condition in ("Complete", "Failed") else None

    result: str = stack.until(ended, f"job {name} of {release} to end", timeout_s=timeout_s)
    return result


def sync_resource(app: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    for res in (operation(app).get("syncResult") or {}).get("resources") or []:
        if res.get("kind") == kind and res.get("name") == name:
            found: dict[str, Any] = res
            return found
    return {}


@dataclass
class ReleaseRepo:
    """One Git repository of the release chart, its Application, and the pushes to it."""

    argo: argocd.ArgoCD
    kube: Any
    work: Path
    config: dict[str, str] | None = None  # a ConfigMap, and configConsistency in the gate
    url: str = ""
    cluster_ip: str = ""

    @property
    def name(self) -> str:
        return self.kube.namespace  # one repository and one Application per test namespace

    def __post_init__(self) -> None:
        argocd.create_repository(self.argo, self.name)
        # the Service first, so its ClusterIP (the gate's target) is known to the chart; Argo CD adopts it
        self.kube.apply(yaml.safe_dump(releases.service()))
        self.cluster_ip = self.kube.get("service", releases.APP)["spec"]["clusterIP"]
        self.url = f"http://{self.cluster_ip}:{releases.SERVICE_PORT}"

    def release(self, version: str, model: str) -> tuple[Timeline, dict[str, Any], str]:
        """Push the chart of this release, have Argo CD sync it, and follow the sync to its end."""
        checked = self.name if self.config is not None else None
        files = releases.chart(self.url, version, model, self.cluster_ip, self.config, checked)
        sha = argocd.push(self.argo, self.name, files, f"model-server {version} ({model})", self.work)
        pushed = time.monotonic()
        if get_app_or_none(self.argo, self.name) is None:
            body = yaml.safe_dump(application(self.argo, self.name, self.name, self.kube.namespace))
            stack.kubectl(self.argo.kubeconfig, "apply", "-f", "-", input_text=body)
        else:
            refresh(self.argo, self.name)
        line, app = follow(self.argo, self.kube, self.name, sha, pushed)
        print(f"release {version} ({model}, {sha[:8]}): {line.row()}; {operation(app).get('message')}")
        return line, app, sha


def test_three_releases_synced_by_argo_cd_are_decided_by_the_gate(
    argo: argocd.ArgoCD, kube: Any, tmp_path: Path
) -> None:
    repo = ReleaseRepo(argo, kube, tmp_path / "work")

    # --- release N: the first sync; the gate passes, then the PostSync gate ---
    line, app, rev = repo.release("1.0.0", releases.GOOD_MODEL)
    assert line.phase == "Succeeded", explain(app)
    assert app["status"]["sync"]["revision"] == rev and app["status"]["health"]["status"] == "Healthy"
    status = kube.get("mcpreadiness", releases.GATE)["status"]
    assert status["verdict"] == "Pass" and status["evaluations"] == 1, status
    assert status["release"]["revision"] == rev  # what Argo CD rendered from $ARGOCD_APP_REVISION
    assert sync_resource(app, "Job", releases.GATE).get("hookPhase") == "Succeeded"
    assert wait_job(kube, releases.GATE, rev) == "Complete"
    # Argo CD's own resource tree: the shipped health check read the gate as it evaluated
    assert "Progressing" in line.gate_health and line.gate_health[-1] == "Healthy", line.gate_health

    # --- release N+1: a broken build; the gate's wave goes Degraded, the sync fails, SyncFail runs ---
    line, app, rev = repo.release("1.1.0", releases.BROKEN_MODEL)
    assert line.phase == "Failed", explain(app)
    status = kube.get("mcpreadiness", releases.GATE)["status"]
    assert status["verdict"] == "Fail" and status["evaluations"] == 2, status
    assert status["release"]["revision"] == rev
    assert line.gate_health[-2:] == ["Progressing", "Degraded"], line.gate_health
    assert app["status"]["health"]["status"] == "Degraded"
    assert sync_resource(app, "MCPReadiness", releases.GATE).get("status") == "Synced"
    assert sync_resource(app, "Job", releases.GATE) == {}  # stopped at the gate's wave: no PostSync
    assert wait_job(kube, "release-gate-syncfail", rev) == "Complete"

    # --- release N+2: good again ---
    line, app, rev = repo.release("1.2.0", releases.GOOD_MODEL)
    assert line.phase == "Succeeded", explain(app)
    status = kube.get("mcpreadiness", releases.GATE)["status"]
    assert status["verdict"] == "Pass" and status["evaluations"] == 3, status  # one per release
    assert status["release"]["revision"] == rev == app["status"]["sync"]["revision"]
    assert wait_job(kube, releases.GATE, rev) == "Complete"
    assert line.gate_health[-2:] == ["Progressing", "Healthy"], line.gate_health


def test_without_the_health_checks_the_postsync_gate_alone_stops_a_broken_release(
    cluster: ClusterState, kubeconfig: Path, kube: Any, tmp_path: Path
) -> None:
    """An Argo CD whose user skipped adding our health checks to argocd-cm (a second one, in its
    own namespace) sees no health for an MCPReadiness, so the gate's wave passes at once; the
    PostSync hook is then what waits for this release's verdict and fails the sync."""
    bare = argocd.start_argocd(
        tmp_path / "argocd",
        kubeconfig,
        cluster.server,
        namespace=f"argocd-{kube.namespace}",
        health_checks=False,
    )
    try:
        repo = ReleaseRepo(bare, kube, tmp_path / "work")
        line, app, rev = repo.release("1.0.0", releases.GOOD_MODEL)
        assert line.phase == "Succeeded", explain(app)
        assert sync_resource(app, "Job", releases.GATE).get("hookPhase") == "Succeeded"
        # no health check: no health in the tree (Missing only before Argo CD created it)
        assert set(line.gate_health) <= {"Missing"}, line.gate_health

        line, app, rev = repo.release("1.1.0", releases.BROKEN_MODEL)
        assert line.phase == "Failed", explain(app)
        hook = sync_resource(app, "Job", releases.GATE)
        assert hook.get("hookPhase") == "Failed", hook  # the PostSync gate decided
        assert wait_job(kube, releases.GATE, rev) == "Failed"
        assert wait_job(kube, "release-gate-syncfail", rev) == "Complete"
        status = kube.get("mcpreadiness", releases.GATE)["status"]
        assert status["verdict"] == "Fail" and status["release"]["revision"] == rev, status
    finally:
        argocd.stop_argocd(bare)
        stack.kubectl(kubeconfig, "delete", "namespace", bare.namespace, "--wait=false", check=False)


def test_benchmark_health_as_argo_cd_shows_it(
    argo: argocd.ArgoCD, kube: Any, tmp_path: Path, refserver: str, sample: Any
) -> None:
    """Two MCPBenchmarks synced from Git: the sample against the reference server (Progressing
    while its shards run, then Healthy) and one the operator rejects (Degraded, with its reason)."""
    name = kube.namespace
    argocd.create_repository(argo, name)
    broken = {"target": {"url": refserver, "backend": "openai"}, "load": {"concurrency": [1], "requests": 5}}
    manifests = sample("mcpbenchmark-refserver.yaml", refserver) + "\n---\n"
    manifests += stack.custom_resource("MCPBenchmark", "no-model", broken)
    argocd.push(argo, name, {"benchmarks.yaml": manifests}, "two benchmarks", tmp_path / "work")
    body = yaml.safe_dump(application(argo, name, name, kube.namespace, helm=False))
    stack.kubectl(argo.kubeconfig, "apply", "-f", "-", input_text=body)
    seen: list[str] = []

    def settled() -> dict[str, str] | None:
        health = argocd.tree_health(argocd.resource_tree(argo, name))
        good = health.get("MCPBenchmark/refserver-bench")
        if good and (not seen or seen[-1] != good):
            seen.append(good)
        done = good == "Healthy" and health.get("MCPBenchmark/no-model") == "Degraded"
        return health if done else None

    health = stack.until(settled, "Argo CD to show both benchmarks' health", timeout_s=240, interval_s=0.1)
    print(f"MCPBenchmark health in Argo CD's resource tree: {' → '.join(seen)}; {health}")
    assert [h for h in seen if h != "Missing"] == ["Progressing", "Healthy"], seen  # Missing: not created yet
    assert get_app(argo, name)["status"]["health"]["status"] == "Degraded"
    assert kube.get("mcpbenchmark", "refserver-bench")["status"]["phase"] == "Succeeded"


def config_spec(namespace: str, app: str, expected: str | None = None) -> ConfigConsistencySpec:
    return ConfigConsistencySpec(
        namespace=namespace,
        workload=releases.APP,
        config_maps=(releases.CONFIG,),
        annotation=releases.CONFIG_ANNOTATION,
        application=ArgoApplicationRef(name=app, expected_revision=expected),
    )


async def test_config_consistency_reads_the_application_argo_cd_wrote(
    argo: argocd.ArgoCD, kube: Any, tmp_path: Path
) -> None:
    """The gate's configConsistency, inside a real sync (its wave, Argo CD 3's Application with no
    per-resource health), then on its own after the sync, and after a hand edit of the live
    ConfigMap, which both the hash and Argo CD's sync status must show."""
    repo = ReleaseRepo(argo, kube, tmp_path / "work", config={"model.json": '{"max_batch": 8}'})
    line, app, rev = repo.release("1.0.0", releases.GOOD_MODEL)
    rows = {c["name"]: c for c in kube.get("mcpreadiness", releases.GATE)["status"]["checks"]}
    print(f"the gate's rows inside the sync: {json.dumps(rows)[:3000]}")
    assert line.phase == "Succeeded", explain(app)
    in_sync = rows["config-consistency"]
    print(f"config-consistency inside the sync: {json.dumps(in_sync)[:1500]}")
    assert in_sync["verdict"] == "Pass", in_sync
    assert in_sync["observed"]["syncRevision"] == rev and in_sync["observed"]["operationPhase"] == "Running"

    client = config.new_client_from_config(config_file=str(kube.kubeconfig))
    try:
        after = await run_config_consistency(config_spec(kube.namespace, repo.name), client)
        assert after.outcome == Verdict.PASS, after
        assert after.observed["syncStatus"] == "Synced" and after.observed["operationPhase"] == "Succeeded"
        assert rev in after.observed["expectedRevision"], after.observed

        wrong = await run_config_consistency(
            config_spec(kube.namespace, repo.name, expected="0" * 40), client
        )
        assert (wrong.outcome, wrong.reason) == (Verdict.FAIL, "RevisionMismatch"), wrong

        # a hand edit of the live ConfigMap after the sync
        kube.run(
            "patch", "configmap", releases.CONFIG, "--type", "merge", "-p", '{"data":{"model.json":"{}"}}'
        )
        stack.until(
            lambda: get_app(argo, repo.name)["status"]["sync"]["status"] == "OutOfSync",
            "Argo CD to see the edited ConfigMap",
            timeout_s=120,
        )
        drifted = await run_config_consistency(config_spec(kube.namespace, repo.name), client)
    finally:
        client.close()
    print(f"config-consistency after the hand edit: {json.dumps(asdict(drifted))[:1500]}")
    assert (drifted.outcome, drifted.reason) == (Verdict.FAIL, "TemplateChecksumMismatch"), drifted
    # Argo CD's own finding: the ConfigMap is OutOfSync with Git
    assert f"not Synced and Healthy: ConfigMap/{releases.CONFIG}" in drifted.message, drifted.message
    assert any(
        f.subject == f"ConfigMap/{releases.CONFIG}" and f.reason == "ResourceNotSynced"
        for f in drifted.findings
    )
