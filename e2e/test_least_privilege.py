"""Least privilege, against the real API server's RBAC (issue 19, item 10; issue 35, item 6).

What each install grants the operator's ServiceAccount is asked the way an admin would, with
``kubectl auth can-i --as``: the default install (the Helm chart with no value set, the kustomize
base) works only in its own namespace, and anywhere else, kube-system included, can neither read
a Secret nor create a Job, Secret, ServiceAccount, Role or RoleBinding; a namespaced install
(``watchNamespaces``) holds its working rights only in the watched namespaces and nothing that
breaks anything anywhere; the cluster-wide install is a value of its own (``clusterWide``) and
holds no fault right either; upgrading a cluster-wide release to the default takes the
cluster-wide grant away; a namespace's owner opts in with the RoleBinding the docs give, and only
that namespace gains the rights.

Then the operator itself runs with that account's token (its own process, a kubeconfig holding
a token from the TokenRequest API), watching only its namespace: a benchmark runs to its verdict
on the Roles alone, and a drill's fault in a namespace whose owner did not grant the fault
rights is refused before anything is touched (``FaultNotPermitted``) until the RoleBinding
exists, and then is injected and reverted.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import build, stack

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "mcp-operator"
OPT_IN = "mcp2026.io/fault-injection=enabled"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

CanI = Callable[..., bool]


@pytest.fixture
def install(kube: Any) -> Iterator[Callable[..., str]]:
    """``install(release, *helm_args)`` into a namespace of its own; returns that namespace."""
    helm = str(build.binary("helm", "helm"))
    made: list[tuple[str, str]] = []

    def run(release: str, *args: str) -> str:
        namespace = f"{kube.namespace}-{release}"
        stack.kubectl(kube.kubeconfig, "create", "namespace", namespace)
        made.append((release, namespace))
        argv = [helm, f"--kubeconfig={kube.kubeconfig}", "--namespace", namespace, "install", release]
        _run([*argv, str(CHART), "--skip-crds", "--set", "replicaCount=0", *args])
        return namespace

    yield run
    for release, namespace in made:
        _run(
            [helm, f"--kubeconfig={kube.kubeconfig}", "--namespace", namespace, "uninstall", release],
            check=False,
        )
        stack.kubectl(kube.kubeconfig, "delete", "namespace", namespace, "--wait=false", check=False)


def _run(argv: list[str], check: bool = True) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}:\n{result.stderr}")


def _can_i(kube: Any, account: str) -> CanI:
    """``can(verb, resource, namespace, subresource)``; ``every=True``: in every namespace at once
    (what only a cluster-wide grant allows)."""

    def ask(
        verb: str,
        resource: str,
        namespace: str | None = None,
        subresource: str | None = None,
        every: bool = False,
    ) -> bool:
        args = ["auth", "can-i", verb, resource, f"--as={account}"]
        args += ["--all-namespaces"] if every else ["-n", namespace] if namespace else []
        args += [f"--subresource={subresource}"] if subresource else []
        answer = stack.kubectl(kube.kubeconfig, *args, check=False).stdout.strip()
        assert answer in ("yes", "no"), answer
        return answer == "yes"

    return ask


FAULT_RIGHTS = [
    ("create", "pods", "eviction"),
    ("delete", "pods", None),
    ("patch", "deployments.apps", None),
    ("patch", "deployments.apps", "scale"),
]  # (Chaos Mesh's kinds too, tests/operator/readiness/faults/test_faults_rbac.py: no CRDs here)


# a run's own account, key and Job (the operator's work) and the rights that turn a token into
# every Secret and every ServiceAccount of a namespace
WORK = [
    ("get", "secrets", None),
    ("create", "secrets", None),
    ("create", "jobs.batch", None),
    ("create", "serviceaccounts", None),
    ("create", "roles", None),
    ("create", "rolebindings", None),
    ("create", "configmaps", None),
    ("list", "pods", None),
    ("get", "pods", "log"),
    ("patch", "mcpbenchmarks.mcp2026.io", "status"),
    ("patch", "mcpreadinesses.mcp2026.io", "status"),
]


def _works_only_in(can: CanI, inside: list[str], outside: list[str]) -> None:
    for verb, resource, sub in WORK:
        for namespace in inside:
            assert can(verb, resource, namespace, sub), ("inside", namespace, verb, resource, sub)
        for namespace in outside:
            assert not can(verb, resource, namespace, sub), ("outside", namespace, verb, resource, sub)
        assert not can(verb, resource, None, sub, every=True), ("every namespace", verb, resource, sub)


def test_the_default_install_works_in_its_own_namespace_only(kube: Any, install: Any) -> None:
    """No value set: the chart's operator works where it is installed, and nowhere else can it
    read a Secret (kube-system's included) or create a Job, Secret, ServiceAccount, Role or
    RoleBinding; cluster-wide it reads only CRDs, namespaces and nodes."""
    own = install("ld")
    can = _can_i(kube, f"system:serviceaccount:{own}:ld")
    _works_only_in(can, inside=[own], outside=["kube-system", "default", kube.namespace])
    assert can("list", "nodes") and can("watch", "customresourcedefinitions") and can("list", "namespaces")
    assert not can("get", "secrets", None, every=True)
    for verb, resource, sub in FAULT_RIGHTS:
        assert not can(verb, resource, own, sub), (verb, resource, sub)
    assert not can("create", "pods", own) and not can("patch", "nodes")
    # and it watches only there
    command = json.loads(
        stack.kubectl(kube.kubeconfig, "-n", own, "get", "deployment", "ld", "-o", "json").stdout
    )["spec"]["template"]["spec"]["containers"][0]["command"]
    assert [a for a in command if a.startswith("--namespace")] == [f"--namespace={own}"]


def test_upgrading_a_cluster_wide_release_to_the_default_takes_the_grant_away(
    kube: Any, install: Any
) -> None:
    """A release installed cluster-wide (the chart's old default, now ``clusterWide=true``)
    upgraded with the default values: Helm replaces the ClusterRoleBinding (its roleRef cannot
    change, so each mode's binding has its own name), and the grant is gone at once."""
    own = install("lu", "--set", "clusterWide=true")
    can = _can_i(kube, f"system:serviceaccount:{own}:lu")
    assert can("get", "secrets", "kube-system") and can("create", "rolebindings", kube.namespace)
    helm = str(build.binary("helm", "helm"))
    _run([helm, f"--kubeconfig={kube.kubeconfig}", "--namespace", own, "upgrade", "lu", str(CHART),
          "--skip-crds", "--set", "replicaCount=0"])  # fmt: skip
    _works_only_in(can, inside=[own], outside=["kube-system", kube.namespace])
    assert stack.kubectl(kube.kubeconfig, "get", "clusterrolebinding", "lu", check=False).returncode != 0


def test_the_kustomize_base_works_in_its_own_namespace_only(kube: Any, tmp_path: Path) -> None:
    """manifests/base's RBAC applied for real (in a namespace and with names of this test's own,
    through an overlay as manifests/overlays/namespace writes one; the Deployment left out: no
    image here): its account works in its namespace only; manifests/overlays/cluster-wide is the
    one that reaches everywhere."""
    namespace, suffix = f"{kube.namespace}-kz", f"-{kube.namespace}"
    example = yaml.safe_load(
        (REPO / "manifests" / "overlays" / "namespace" / "kustomization.yaml").read_text()
    )
    applied: list[str] = []
    stack.kubectl(kube.kubeconfig, "create", "namespace", namespace)
    try:
        for target, inside, outside in [
            ("base", [namespace], ["kube-system", kube.namespace]),
            ("overlays/cluster-wide", [namespace, "kube-system", kube.namespace], []),
        ]:
            root = tmp_path / target.replace("/", "-")
            root.mkdir()
            overlay = {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": namespace,
                "nameSuffix": suffix,
                "resources": [os.path.relpath(REPO / "manifests" / target, root)],
                "replacements": example["replacements"],
            }
            (root / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
            rendered = yaml.safe_load_all(stack.kubectl(kube.kubeconfig, "kustomize", str(root)).stdout)
            rbac = [d for d in rendered if d and d["kind"] in RBAC_KINDS]
            text = yaml.safe_dump_all(rbac)
            stack.kubectl(kube.kubeconfig, "apply", "-f", "-", input_text=text)
            applied.append(text)
            can = _can_i(kube, f"system:serviceaccount:{namespace}:mcp-operator{suffix}")
            if outside:
                _works_only_in(can, inside, outside)
            else:
                assert all(can("get", "secrets", ns) and can("create", "rolebindings", ns) for ns in inside)
                assert can("get", "secrets", None, every=True)
            for verb, resource, sub in FAULT_RIGHTS:
                assert not can(verb, resource, namespace, sub), (target, verb, resource, sub)
            stack.kubectl(kube.kubeconfig, "delete", "-f", "-", "--wait=true", input_text=text, check=False)
    finally:
        for text in applied:
            stack.kubectl(
                kube.kubeconfig, "delete", "-f", "-", "--ignore-not-found", input_text=text, check=False
            )
        stack.kubectl(kube.kubeconfig, "delete", "namespace", namespace, "--wait=false", check=False)


def test_a_namespaced_install_holds_its_rights_only_where_it_watches(kube: Any, install: Any) -> None:
    ns = kube.namespace
    own = install("lp", "--set", f"watchNamespaces={{{ns}}}")
    can = _can_i(kube, f"system:serviceaccount:{own}:lp")
    # its work, in the watched namespace
    for verb, resource, sub in [
        ("create", "jobs.batch", None),
        ("get", "secrets", None),
        ("create", "configmaps", None),
        ("patch", "mcpbenchmarks.mcp2026.io", "status"),
        ("get", "pods", "log"),
        ("get", "namespaces", None),
    ]:
        assert can(verb, resource, ns, sub), (verb, resource, sub)
    # nothing of it anywhere else
    for verb, resource in [
        ("get", "secrets"),
        ("create", "jobs.batch"),
        ("list", "pods"),
        ("create", "roles"),
    ]:
        assert not can(verb, resource, "kube-system"), (verb, resource)
    # cluster-wide: reads of cluster-scoped objects only
    assert can("list", "nodes") and can("watch", "customresourcedefinitions")
    assert not can("patch", "nodes") and not can("get", "secrets", "default")
    # no fault right, and no pod creation, until the namespace's owner grants them
    for verb, resource, sub in FAULT_RIGHTS:
        assert not can(verb, resource, ns, sub), (verb, resource, sub)
    assert not can("create", "pods", ns)
    # the opt-in the docs give: a RoleBinding of the faults ClusterRole in this namespace only
    kube.run("create", "rolebinding", "lp-faults", "--clusterrole=lp-faults", f"--serviceaccount={own}:lp")
    for verb, resource, sub in FAULT_RIGHTS:
        assert can(verb, resource, ns, sub), (verb, resource, sub)
        assert not can(verb, resource, "kube-system", sub), (verb, resource, sub)
    assert not can("patch", "nodes")


def test_the_cluster_wide_choice_grants_work_everywhere_and_no_fault_right(kube: Any, install: Any) -> None:
    own = install("lw", "--set", "clusterWide=true")
    can = _can_i(kube, f"system:serviceaccount:{own}:lw")
    assert can("create", "jobs.batch", kube.namespace) and can("create", "jobs.batch", "default")
    # what the choice means: every Secret, kube-system's included, and accounts anywhere
    assert can("get", "secrets", "kube-system") and can("create", "rolebindings", "kube-system")
    assert can("get", "secrets", None, every=True)
    for namespace in (kube.namespace, "kube-system"):
        for verb, resource, sub in FAULT_RIGHTS:
            assert not can(verb, resource, namespace, sub), (namespace, verb, resource, sub)
        assert not can("create", "pods", namespace)
    assert not can("patch", "nodes")
    # the chart's own opt-ins
    own = install(
        "lx", "--set", f"rbac.faultNamespaces={{{kube.namespace}}}", "--set", "rbac.nodeFaults=true"
    )
    can = _can_i(kube, f"system:serviceaccount:{own}:lx")
    assert can("create", "pods", kube.namespace, "eviction")
    assert not can("create", "pods", "default", "eviction")
    assert can("patch", "nodes")


def _token_kubeconfig(kube: Any, namespace: str, account: str, path: Path) -> Path:
    token = stack.kubectl(
        kube.kubeconfig, "-n", namespace, "create", "token", account, "--duration=1h"
    ).stdout
    admin = yaml.safe_load(Path(kube.kubeconfig).read_text())
    admin["users"] = [{"name": account, "user": {"token": token.strip()}}]
    for context in admin["contexts"]:
        context["context"]["user"] = account
    path.write_text(yaml.safe_dump(admin))
    return path


def test_the_operator_works_on_its_roles_alone_and_faults_wait_for_the_owner(
    kube: Any, install: Any, operator: Any, refserver: str, tmp_path: Path
) -> None:
    ns = kube.namespace
    own = install("lo", "--set", f"watchNamespaces={{{ns}}}")
    kubeconfig = _token_kubeconfig(kube, own, "lo", tmp_path / "kubeconfig")
    stack.stop(operator.process)  # the shared operator watches every namespace; the next test restarts it
    restricted = stack.start_operator(
        kubeconfig,
        tmp_path,
        namespaces=[ns],
        identity=f"lo-{uuid.uuid4().hex[:6]}",
        env={"MCP_LEASE_NAMESPACE": own, "MCP_LEASE_NAME": "lo"},
    )
    try:
        bench = {
            "target": {"url": refserver, "backend": "http", "path": "/health"},
            "load": {"concurrency": [2], "durationSeconds": 2},
            "shards": 1,
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
        }
        kube.apply(stack.custom_resource("MCPBenchmark", "roles-only", bench))
        waited = kube.wait("mcpbenchmark/roles-only", "condition=Ready", timeout_s=120)
        status = kube.get("mcpbenchmark", "roles-only").get("status") or {}
        assert waited.returncode == 0 and status.get("verdict") == "Pass", json.dumps(status, indent=1)

        kube.run("label", "namespace", ns, OPT_IN)
        kube.apply(stack.kwok_deployment())
        stack.until(
            lambda: int(kube.get("deployment", "srv").get("status", {}).get("readyReplicas") or 0) == 3,
            "srv ready",
        )
        fault = {"kind": "scaleDown", "workload": "srv", "replicas": 1, "atSeconds": 0.2}
        drill = {"stages": [{"name": "only", "load": {"rate": 20, "durationSeconds": 1}, "faults": [fault]}]}
        gate = {
            "target": {"url": refserver},
            "checks": {"healthProbe": {"requests": 100, "minSuccessRatio": 0.99, "maxProberLagMs": 250}},
            "drill": {"kpis": {"healthSuccessRatio": 0.9}, **drill},
        }
        kube.apply(stack.custom_resource("MCPReadiness", "not-granted", gate))
        assert kube.wait("mcpreadiness/not-granted", "condition=Ready=false", timeout_s=90).returncode == 0
        status = kube.get("mcpreadiness", "not-granted")["status"]
        assert "faults" in status, json.dumps(status, indent=1)
        (skipped,) = status["faults"]
        assert skipped["phase"] == "Skipped" and "FaultNotPermitted" in skipped["message"], skipped
        assert status["verdict"] == "Error" and any(
            c["reason"] == "FaultNotPermitted" for c in status["checks"]
        )
        assert "patch deployments.apps/scale in" in skipped["message"]
        assert int(kube.get("deployment", "srv")["spec"]["replicas"]) == 3  # never touched

        kube.run(
            "create", "rolebinding", "lo-faults", "--clusterrole=lo-faults", f"--serviceaccount={own}:lo"
        )
        kube.apply(stack.custom_resource("MCPReadiness", "granted", gate))
        assert kube.wait("mcpreadiness/granted", "condition=Complete", timeout_s=90).returncode == 0
        status = kube.get("mcpreadiness", "granted")["status"]
        (done,) = status["faults"]
        assert done["phase"] == "Reverted", done
        assert int(kube.get("deployment", "srv")["spec"]["replicas"]) == 3
        assert "Forbidden" not in restricted.process.log_tail(), restricted.process.log_tail()
    finally:
        stack.stop(restricted.process)
