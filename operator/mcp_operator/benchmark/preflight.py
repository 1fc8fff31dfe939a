"""Tiered preflight of an MCPBenchmark: pure checks over what was read from the API, so a run that
cannot start (no node fits, a quota forbids the pods, an account is missing) is said before any
Job exists instead of after its deadline. Each finding has its own CamelCase reason.

The reads are in ``preflight_read``; the scheduler's own verdict on a running shard is read from
its pods (``unschedulable_message``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from ..api.benchmark import MCPBenchmarkSpec
from ..api.results import MAX_PREFLIGHT_FINDINGS, PreflightStatus
from ..api.runner import Toleration
from ..bounded import MAX_MESSAGE, clip
from ..conditions import condition, set_condition
from ..rejection import rejected_fields
from ..targets import SpecProblem
from .status import ended

GPU = "nvidia.com/gpu"
CONDITION = "PreflightPassed"
UNSCHEDULABLE = "Unschedulable"
# taints that keep a pod off a node; PreferNoSchedule only prefers
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeView:
    """What placement needs of a Node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    gpus: int = 0
    unschedulable: bool = False


@dataclass(frozen=True)
class QuotaView:
    """A ResourceQuota's hard limits and what is used of them (quantities as the API writes them)."""

    name: str
    hard: Mapping[str, str]
    used: Mapping[str, str]


@dataclass(frozen=True)
class Observed:
    """Everything the preflight read; ``None`` where a read was not possible (not a finding)."""

    nodes: Sequence[NodeView] | None
    quotas: Sequence[QuotaView] | None
    account_exists: bool | None
    image: str
    target_error: str | None = None
    server: Mapping[str, str] = field(default_factory=dict)


def tolerates(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    """Kubernetes' toleration matching: empty effect matches all effects, empty key with Exists all keys."""
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if (t.operator or "Equal") == "Exists":
            if not t.key or t.key == taint.key:
                return True
        elif t.key == taint.key and (t.value or "") == taint.value:
            return True
    return False


def _fits_selector(node: NodeView, selector: Mapping[str, str]) -> bool:
    return all(node.labels.get(key) == value for key, value in selector.items())


def _blocking_taints(node: NodeView, tolerations: Sequence[Toleration]) -> list[Taint]:
    return [t for t in node.taints if t.effect in BLOCKING_EFFECTS and not tolerates(tolerations, t)]


def placement_findings(spec: MCPBenchmarkSpec, nodes: Sequence[NodeView]) -> list[SpecProblem]:
    """Some schedulable node must match the nodeSelector, have every blocking taint tolerated and
    offer the GPUs one shard asks for; the finding names the first filter nothing passed."""
    runner = spec.runner
    candidates = [n for n in nodes if not n.unschedulable]
    if not candidates:
        return [SpecProblem("NoSchedulableNode", "no node accepts pods (none exists, or all are cordoned)")]
    selected = [n for n in candidates if _fits_selector(n, runner.node_selector)]
    if not selected:
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(runner.node_selector.items()))
        return [SpecProblem("NoNodeMatchesSelector", f"no schedulable node has the labels {wanted}")]
    tolerated = [n for n in selected if not _blocking_taints(n, runner.tolerations)]
    if not tolerated:
        taints = sorted(
            {
                f"{t.key}={t.value}:{t.effect}"
                for n in selected
                for t in _blocking_taints(n, runner.tolerations)
            }
        )
        return [
            SpecProblem(
                "TaintsNotTolerated",
                "every node matching the nodeSelector has a taint the shards do not tolerate: "
                + ", ".join(taints[:5]),
            )
        ]
    if runner.gpus and not any(n.gpus >= runner.gpus for n in tolerated):
        most = max(n.gpus for n in tolerated)
        return [
            SpecProblem(
                "InsufficientGpu",
                f"each shard asks for {runner.gpus} {GPU}; the most any eligible node has allocatable "
                f"is {most}",
            )
        ]
    return []


def _quantity(value: str) -> Decimal:
    return Decimal(str(parse_quantity(value)))


def pod_requests(spec: MCPBenchmarkSpec) -> dict[str, Decimal]:
    """What the run's pods add to a quota's usage, by the quota's resource names."""
    runner, shards = spec.runner, Decimal(spec.shards)
    cpu, memory = _quantity(runner.cpu) * shards, _quantity(runner.memory) * shards
    asked = {
        "pods": shards,
        "count/pods": shards,
        "cpu": cpu,
        "requests.cpu": cpu,
        "memory": memory,
        "requests.memory": memory,
    }
    if runner.gpus:
        gpus = Decimal(runner.gpus) * shards
        asked[f"requests.{GPU}"] = gpus
        asked[f"limits.{GPU}"] = gpus
    return asked


def quota_findings(spec: MCPBenchmarkSpec, quotas: Sequence[QuotaView]) -> list[SpecProblem]:
    """Every quota must leave room for all shards at once (they run in parallel)."""
    asked = pod_requests(spec)
    over: list[str] = []
    for quota in quotas:
        for resource, amount in sorted(asked.items()):
            if resource not in quota.hard:
                continue
            left = _quantity(quota.hard[resource]) - _quantity(quota.used.get(resource, "0"))
            if amount > left:
                over.append(
                    f"{quota.name}: {resource} needs {amount.normalize():f}, {left.normalize():f} left"
                )
    if not over:
        return []
    return [
        SpecProblem(
            "QuotaExceeded",
            f"the namespace's ResourceQuota forbids the {spec.shards} shard pod(s): " + "; ".join(over[:4]),
        )
    ]


def findings(spec: MCPBenchmarkSpec, seen: Observed) -> list[SpecProblem]:
    """Every finding, in the order a person would fix them."""
    found: list[SpecProblem] = []
    if seen.target_error is not None:
        found.append(SpecProblem("TargetUnreachable", f"the target did not answer: {seen.target_error}"))
    if not seen.image:
        found.append(
            SpecProblem(
                "NoRunnerImage", "no runner image: set spec.runner.image or the operator's MCP_RUNNER_IMAGE"
            )
        )
    if seen.account_exists is False:
        found.append(
            SpecProblem(
                "ServiceAccountMissing",
                f"service account {spec.runner.service_account_name} does not exist in the namespace",
            )
        )
    if seen.nodes is not None:
        found.extend(placement_findings(spec, seen.nodes))
    if seen.quotas is not None:
        found.extend(quota_findings(spec, seen.quotas))
    return found[:MAX_PREFLIGHT_FINDINGS]


def preflight_fields(
    *,
    mode: str,
    found: Sequence[SpecProblem],
    server: Mapping[str, str],
    conditions: list[dict[str, Any]],
    generation: int,
    now: str,
) -> tuple[PreflightStatus, list[dict[str, Any]]]:
    """The preflight's status block and the PreflightPassed condition (its reason is the first
    finding's; the message lists them all)."""
    block = PreflightStatus.model_validate(
        {
            "mode": mode,
            "findings": [{"reason": f.reason, "message": clip(f.message, 512)} for f in found],
            "server": {k: clip(v, 256) for k, v in server.items() if v},
        }
    )
    if mode == "off":
        conds = set_condition(
            conditions, CONDITION, None, "PreflightSkipped", "spec.preflight is off", generation, now
        )
    elif found:
        message = "; ".join(f"{f.reason}: {f.message}" for f in found)
        if mode == "warn":
            message += " (spec.preflight is warn: the run goes on)"
        conds = set_condition(conditions, CONDITION, False, found[0].reason, message, generation, now)
    else:
        answered = " ".join(v for v in (server.get("serverName"), server.get("serverVersion")) if v)
        message = "target answered" + (f" ({answered})" if answered else "") + "; a node fits the shards"
        conds = set_condition(conditions, CONDITION, True, "PreflightPassed", message, generation, now)
    return block, conds


def unschedulable_message(pods: Sequence[Any]) -> str | None:
    """The scheduler's message for the first shard pod it could not place (its PodScheduled
    condition False with reason Unschedulable), or None when every pending pod is placed."""
    for pod in pods:
        if pod.status is None or pod.status.phase != "Pending":
            continue
        for cond in pod.status.conditions or []:
            if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
                return f"shard pod {pod.metadata.name}: {cond.message or 'unschedulable'}"
    return None


def stopped_fields(
    conditions: list[dict[str, Any]], generation: int, found: Sequence[SpecProblem], now: str
) -> dict[str, Any]:
    """strict mode and a finding: no Job; Ready (and Accepted) False with the first finding's
    reason, once per generation, as for a rejected spec."""
    fields = rejected_fields(conditions, generation, list(found), now)
    first = found[0]
    conds = ended(
        fields["conditions"],
        failed=True,
        reason=first.reason,
        message=first.message,
        generation=generation,
        now=now,
    )
    return {**fields, "phase": "Failed", "conditions": conds}


def scheduling_conditions(
    conditions: list[dict[str, Any]], generation: int, stuck: str | None, now: str
) -> list[dict[str, Any]] | None:
    """Ready False Unschedulable while the scheduler cannot place a shard (a node may still come:
    the Job runs on), back to Unknown once it can; None when nothing changes."""
    ready = condition(conditions, "Ready") or {}
    if stuck is not None:
        if ready.get("reason") == UNSCHEDULABLE and ready.get("message") == clip(stuck, MAX_MESSAGE):
            return None
        return set_condition(conditions, "Ready", False, UNSCHEDULABLE, stuck, generation, now)
    if ready.get("reason") != UNSCHEDULABLE:
        return None
    return set_condition(conditions, "Ready", None, "Running", "waiting for shard results", generation, now)
