"""The safety rules a fault passes before anything is touched: the namespace opted in (its
label, and its owner granting the operator the fault's rights), the blast radius, pods a
controller replaces, and PodDisruptionBudgets that would refuse.

Everything here reads only; a failed rule is a FaultRefused with its own reason.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import kube
from ...access import Right, missing
from ...api.drill import FAULT_OPT_IN_LABEL, FAULT_OPT_IN_VALUE, FaultPolicy
from .base import Apis, FaultRefused, PlannedFault, names_shown
from .selection import controller_kind, selector_matches


async def require_opt_in(apis: Apis, namespace: str) -> None:
    """Faults only where the namespace carries ``mcp2026.io/fault-injection=enabled``."""
    try:
        ns = await kube.call(apis.core.read_namespace, namespace)
    except ApiException as exc:
        if exc.status == 404:
            raise FaultRefused("NamespaceNotOptedIn", f"namespace {namespace} does not exist") from exc
        raise
    if (ns.metadata.labels or {}).get(FAULT_OPT_IN_LABEL) != FAULT_OPT_IN_VALUE:
        raise FaultRefused(
            "NamespaceNotOptedIn",
            f"namespace {namespace} lacks the label {FAULT_OPT_IN_LABEL}={FAULT_OPT_IN_VALUE}: "
            "faults are injected only where a namespace opted in",
        )


_TAKE_PODS = (Right("create", "pods/eviction"), Right("delete", "pods"))
_NAMESPACED_RIGHTS: dict[str, tuple[Right, ...]] = {
    "podKill": _TAKE_PODS,
    "zoneOutage": _TAKE_PODS,
    "nodeDrain": _TAKE_PODS,
    "scaleDown": (Right("patch", "deployments/scale", "apps"),),
    "rolloutRestart": (Right("patch", "deployments", "apps"),),
    "configHotUpdate": (Right("patch", "deployments", "apps"),),
}
_CLUSTER_RIGHTS: dict[str, tuple[Right, ...]] = {
    "zoneOutage": (Right("patch", "nodes"),),
    "nodeDrain": (Right("patch", "nodes"),),
}


def fault_rights(planned: PlannedFault) -> tuple[list[Right], list[Right]]:
    """What injecting and reverting ``planned`` needs: in its namespace, and cluster-wide."""
    namespaced = list(_NAMESPACED_RIGHTS.get(planned.kind, ()))
    if planned.kind == "chaosMesh":
        plural = str(planned.undo.get("plural", ""))
        namespaced += [Right(verb, plural, "chaos-mesh.org") for verb in ("create", "delete")]
    return namespaced, list(_CLUSTER_RIGHTS.get(planned.kind, ()))


async def require_rights(apis: Apis, namespace: str, planned: PlannedFault) -> None:
    """Refuse a fault whose rights the namespace's owner has not granted the operator: the
    ClusterRole ``mcp-operator-faults`` bound in the namespace (``mcp-operator-node-faults``
    cluster-wide for cordons), so that the operator can break nothing anywhere else."""
    in_namespace, cluster_wide = fault_rights(planned)
    lacking = [r.shown(namespace) for r in await missing(apis.authz, namespace, in_namespace)]
    lacking += [r.shown(None) for r in await missing(apis.authz, None, cluster_wide)]
    if lacking:
        raise FaultRefused(
            "FaultNotPermitted",
            f"the operator may not {', '.join(lacking)}: a namespace opts in to faults when its owner "
            f"binds the ClusterRole mcp-operator-faults (<release>-faults from the Helm chart) to the "
            f"operator's ServiceAccount there (kubectl -n {namespace} create rolebinding "
            "mcp-operator-faults --clusterrole=mcp-operator-faults --serviceaccount=<operator "
            "namespace>:<operator account>); cordons need mcp-operator-node-faults bound cluster-wide",
        )


def check_pods(policy: FaultPolicy, namespace: str, pods: list[str], what: str) -> None:
    if len(pods) > policy.max_pods:
        raise FaultRefused(
            "BlastRadiusExceeded",
            f"{what} would take {len(pods)} pods of {namespace}, more than faultPolicy.maxPods "
            f"({policy.max_pods}): {names_shown(pods)}",
        )


def check_nodes(policy: FaultPolicy, nodes: list[str], what: str) -> None:
    if len(nodes) > policy.max_nodes:
        raise FaultRefused(
            "BlastRadiusExceeded",
            f"{what} would take {len(nodes)} nodes, more than faultPolicy.maxNodes "
            f"({policy.max_nodes}): {names_shown(nodes)}",
        )


def require_controllers(pods: list[Any], namespace: str) -> None:
    """A pod no controller re-creates could not be given back on revert, so it is not taken
    (``kubectl drain`` refuses such pods too, without --force)."""
    bare = sorted(p.metadata.name for p in pods if controller_kind(p) is None)
    if bare:
        raise FaultRefused(
            "PodWithoutController",
            f"pods of {namespace} without a controller to replace them: {names_shown(bare)}; "
            "killing them could not be reverted",
        )


async def check_budgets(apis: Apis, namespace: str, pods: list[Any]) -> None:
    """Refuse before touching anything when a PodDisruptionBudget allows fewer disruptions now
    than the fault would evict of its pods; the API would answer 429 part way through. A budget
    whose status is not current yet is left to the API's own answer at eviction time."""
    if not pods:
        return
    budgets = await kube.call(apis.policy.list_namespaced_pod_disruption_budget, namespace)
    for pdb in budgets.items:
        covered = sorted(
            p.metadata.name
            for p in pods
            if selector_matches(pdb.spec.selector if pdb.spec else None, p.metadata.labels or {})
        )
        status = pdb.status
        if not covered or status is None:
            continue
        if (status.observed_generation or 0) < (pdb.metadata.generation or 0):
            continue
        allowed = status.disruptions_allowed or 0
        if len(covered) > allowed:
            raise FaultRefused(
                "EvictionRefused",
                f"PodDisruptionBudget {namespace}/{pdb.metadata.name} allows {allowed} disruption(s) "
                f"now and the fault would evict {len(covered)} of its pods ({names_shown(covered)}); "
                "an eviction is never forced",
            )
