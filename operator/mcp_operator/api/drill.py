"""MCPReadiness drills: staged load, the faults injected in each stage, and the KPI board that
judges them. Faults are journaled in ``status.faults`` before they are applied and reverted on
every path, so the journal is the one record of what was done to the cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcp_bench.models import ClassBackend
from mcp_checks.models import DEFAULT_ANNOTATION

from .classes import ClassShare, RequestClassSpec, class_path_field
from .common import ApiModel, LabelValue, Verdict, cel, with_rules
from .credentials import no_credentials_in_query, rules_extra
from .drillmeasures import Autoscaling, ChaosExperiment, LoadRetry, ServerRequests
from .runner import RunnerSpec

FaultKind = Literal[
    "podKill",
    "zoneOutage",
    "configHotUpdate",
    "scaleDown",
    "rolloutRestart",
    "nodeDrain",
    "etcdLeaderMove",
    "chaosMesh",
]
FaultPhase = Literal["Planned", "Injected", "Reverted", "RevertFailed", "Skipped"]
MAX_STAGES = 8
MAX_FAULTS = 16
FAULT_OPT_IN_LABEL = "mcp2026.io/fault-injection"
# zoneOutage with outage nodesDown: the nodes carrying it are to go down (their kubelet silent,
# their pods frozen) until it is removed; an outage agent on each node acts on it
OUTAGE_ANNOTATION = "mcp2026.io/outage"
FAULT_OPT_IN_VALUE = "enabled"


class PodSelection(ApiModel):
    """Pods of this resource's namespace, by label; how many of them a fault takes."""

    match_labels: dict[str, LabelValue] = Field(description="Pods with all of these labels.", min_length=1)
    mode: Literal["one", "count", "percent", "all"] = Field(default="one", description="How many to take.")
    value: int = Field(default=1, ge=1, le=100, description="The count, or the percent, for those modes.")


class FaultSpec(ApiModel):
    """One fault of a stage. Each kind reads the fields it needs; the others must be unset."""

    model_config = with_rules(
        cel("self.kind != 'podKill' || has(self.pods)", "podKill needs pods", ".pods"),
        cel("self.kind != 'zoneOutage' || has(self.zone)", "zoneOutage needs zone", ".zone"),
        cel(
            "self.kind != 'configHotUpdate' || (has(self.configMap) && has(self.data) && has(self.workload))",
            "configHotUpdate needs configMap, data and workload",
            ".configMap",
        ),
        cel(
            "!(self.kind in ['scaleDown', 'rolloutRestart']) || has(self.workload)",
            "scaleDown and rolloutRestart need workload",
            ".workload",
        ),
        cel("self.kind != 'nodeDrain' || has(self.node)", "nodeDrain needs node", ".node"),
        cel("self.kind != 'chaosMesh' || has(self.chaos)", "chaosMesh needs chaos", ".chaos"),
    )

    kind: FaultKind = Field(description="What to break.")
    at_seconds: float = Field(default=0, ge=0, le=86400, description="When, counted from the stage's start.")
    pods: PodSelection | None = Field(default=None, description="podKill: the pods to kill.")
    evict: bool = Field(
        default=True,
        description="podKill, zoneOutage, nodeDrain: use the Eviction API (PodDisruptionBudgets are "
        "respected; a refused eviction is reported, never forced); false deletes the pods.",
    )
    zone: str | None = Field(
        default=None,
        description="zoneOutage: cordon and evict every node with this topology.kubernetes.io/zone.",
    )
    outage: Literal["cordon", "nodesDown"] = Field(
        default="cordon",
        description="zoneOutage: cordon (cordon the zone's nodes and evict this namespace's pods) or "
        "nodesDown (the nodes go down: annotated mcp2026.io/outage for the outage agent on each node, "
        "which silences its kubelet and freezes its pods; the node-lifecycle controller then marks "
        "them NotReady, taints them and evicts their pods; refused OutageNotTaken when no node went "
        "NotReady within outageTimeoutSeconds).",
    )
    outage_timeout_seconds: float = Field(
        default=60,
        gt=0,
        le=600,
        description="zoneOutage nodesDown: how long the nodes may take to be NotReady (the cluster's "
        "node-monitor grace period and a margin).",
    )
    node: str | None = Field(default=None, description="nodeDrain: the node to cordon and drain.")
    workload: str | None = Field(
        default=None,
        description="A Deployment of this namespace (scaleDown, rolloutRestart, configHotUpdate).",
    )
    replicas: int = Field(default=0, ge=0, le=10000, description="scaleDown: replicas during the fault.")
    config_map: str | None = Field(default=None, description="configHotUpdate: the ConfigMap patched.")
    data: dict[str, str] | None = Field(default=None, description="configHotUpdate: keys written into it.")
    annotation: str = Field(
        default=DEFAULT_ANNOTATION,
        description="configHotUpdate: the pod-template annotation that carries the config hash (rolled out).",
    )
    rollout: bool = Field(
        default=True,
        description="configHotUpdate: true rolls the new hash into the pod template (a rollout, timed until "
        "every ready pod runs it); false patches the ConfigMap alone, which the servers reload from their "
        "mounted copy in place, timed until every ready pod answers reportPath with the new hash.",
    )
    report_path: str = Field(
        default="/config",
        pattern=r"^/",
        max_length=1024,
        description="configHotUpdate without rollout: where each server says which config it runs "
        '({"server": its pod name, "hash": the content hash}), asked through the target.',
    )
    chaos: ChaosExperiment | None = Field(
        default=None, description="chaosMesh: the experiment created for the hold and deleted on revert."
    )
    hold_seconds: float = Field(
        default=0,
        ge=0,
        le=3600,
        description="How long the fault stays before it is reverted (0: to the stage end).",
    )


class TrafficClass(ClassShare):
    """One class of a stage's traffic mix: its share of the requests and how they are sent."""

    backend: ClassBackend = Field(
        description="Its protocol: http, openai, openai-chat, triton-http or triton-grpc."
    )
    path: str | None = class_path_field(
        "Appended to the target's URL for this class (http: the request path, e.g. /health)."
    )
    model: str | None = Field(
        default=None, max_length=256, description="The model its requests name (openai and triton backends)."
    )

    def as_request_class(self) -> RequestClassSpec:
        """The same class as a benchmark's workload has it (what the engine's plan is built from)."""
        return RequestClassSpec.model_validate(self.model_dump(by_alias=True, exclude_none=True))


class StageLoad(ApiModel):
    model_config = with_rules(
        cel("has(self.rate) != has(self.concurrency)", "set exactly one of rate and concurrency"),
        cel(
            "!has(self.classes) || self.classes.all(c, c.backend == 'http' || has(c.model))",
            "a stage's class over openai or triton names its model",
            ".classes",
        ),
    )

    rate: float | None = Field(default=None, gt=0, le=1_000_000, description="Open-loop requests per second.")
    concurrency: int | None = Field(
        default=None, ge=1, le=4096, description="Closed-loop requests in flight."
    )
    duration_seconds: float = Field(gt=0, le=86400, description="How long the stage loads the target.")
    path: str = Field(
        default="/health",
        pattern=r"^/",
        max_length=1024,
        description="Request path on the target; its query must not carry credentials (CredentialsInUrl).",
        json_schema_extra=rules_extra(no_credentials_in_query("load path")),
    )
    window_seconds: float = Field(
        default=5,
        gt=0,
        le=600,
        description="Latency is summarised per window, to find when within the stage P99 jumps.",
    )
    retry: LoadRetry | None = Field(
        default=None, description="Client retries, as the service's clients do (none by default)."
    )
    classes: list[TrafficClass] = Field(
        default_factory=list,
        max_length=16,
        description="A traffic mix: weighted request classes, each on its own protocol, path and model "
        "(health checks, V2 inference, chat streaming), reported per class; path is then unused.",
    )


class Stage(ApiModel):
    name: str = Field(description="Stage name, e.g. baseline, mixed, spike.", min_length=1, max_length=63)
    load: StageLoad | None = Field(default=None, description="The load of this stage; unset: no load.")
    faults: list[FaultSpec] = Field(
        default_factory=list, description="Faults injected in this stage.", max_length=8
    )


class KpiThresholds(ApiModel):
    """The KPI board's limits; a value past ``warn`` but within the limit is ! (Warn)."""

    health_success_ratio: float = Field(
        default=0.9999, ge=0, le=1, description="Lowest success share of probes."
    )
    health_success_ratio_warn: float | None = Field(default=None, ge=0, le=1, description="Warn below this.")
    hot_update_seconds: float = Field(default=2.5, gt=0, description="Longest config hot-update rollout.")
    hot_update_seconds_warn: float | None = Field(default=None, gt=0, description="Warn above this.")
    recovery_seconds: float = Field(default=17, gt=0, description="Longest recovery after a fault.")
    recovery_seconds_warn: float | None = Field(default=None, gt=0, description="Warn above this.")
    p99_jump_factor: float = Field(
        default=3.0,
        gt=1,
        description="A window whose P99 exceeds the previous stage's by this factor is a jump.",
    )
    retry_amplification: float = Field(
        default=1.5,
        gt=1,
        description="Highest server-side over client-side request count in a stage (retries without "
        "backoff multiply it).",
    )
    retry_amplification_warn: float | None = Field(default=None, gt=1, description="Warn above this.")
    hpa_scale_up_seconds: float = Field(
        default=60, gt=0, description="Longest time from the load rising to the desired replicas rising."
    )
    hpa_scale_up_seconds_warn: float | None = Field(default=None, gt=0, description="Warn above this.")
    hpa_ready_seconds: float = Field(
        default=120, gt=0, description="Longest time from the load rising to the new pods being Ready."
    )
    hpa_ready_seconds_warn: float | None = Field(default=None, gt=0, description="Warn above this.")
    write_outage_seconds: float = Field(
        default=5, gt=0, description="Longest time API writes may fail during a control-plane fault."
    )
    write_outage_seconds_warn: float | None = Field(default=None, gt=0, description="Warn above this.")
    recovery_window_seconds: float = Field(
        default=2,
        gt=0,
        le=600,
        description="Recovered: the first moment from which every probe in this long succeeds.",
    )


class FaultPolicy(ApiModel):
    max_pods: int = Field(default=10, ge=0, le=10000, description="Blast radius: pods one fault may take.")
    max_nodes: int = Field(default=1, ge=0, le=1000, description="Blast radius: nodes one fault may take.")


class DrillShards(ApiModel):
    """Each stage's load as an MCPBenchmark of its own (owned by this gate): shard Jobs spread
    over the nodes, the same engine, signed results and start barrier as any benchmark, so the
    operator only orchestrates and the load grows with the cluster instead of with its pod."""

    count: int = Field(
        default=2, ge=1, le=64, description="Shard pods per stage; each sends its share of the rate."
    )
    runner: RunnerSpec = Field(
        default_factory=RunnerSpec, description="The shards' placement and resources, as a benchmark's."
    )
    start_timeout_seconds: float = Field(
        default=120,
        gt=0,
        le=3600,
        description="How long the shards may take to be scheduled and start before the stage fails.",
    )


class DrillSpec(ApiModel):
    """Staged load with faults; the run is judged on the KPI board."""

    model_config = with_rules(
        cel("has(self.profile) || (has(self.stages) && size(self.stages) > 0)", "set a profile or stages"),
        cel(
            "!has(self.shards) || !has(self.stages) || "
            "self.stages.all(s, !has(s.load) || !has(s.load.retry))",
            "a stage's load.retry runs in the operator's pod only: unset it or spec.drill.shards",
            ".shards",
        ),
    )

    profile: Literal["MCP2026"] | None = Field(
        default=None,
        description="MCP2026: baseline 500 req/s, mixed 3200, spike +180% for 90 s, with the reference KPIs; "
        "stages given here replace the profile's.",
    )
    scale: float = Field(default=1.0, gt=0, le=10, description="Scales the profile's rates and durations.")
    duration_scale: float | None = Field(
        default=None,
        gt=0,
        le=10,
        description="Scales the profile's durations alone (default: scale), e.g. the full rates (scale 1) "
        "for a tenth of the time (durationScale 0.1).",
    )
    mix: list[TrafficClass] = Field(
        default_factory=list,
        max_length=16,
        description="The profile's mixed stage as a traffic mix of these classes, each naming its backend "
        "(e.g. health over http, V2 inference, chat streaming); default: the health path alone.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "self.all(c, c.backend == 'http' || has(c.model))",
                    "a mix's class over openai or triton names its model",
                ),
            ]
        },
    )
    shards: DrillShards | None = Field(
        default=None,
        description="Run each stage's load as shard Jobs (an MCPBenchmark per stage); unset: in the "
        "operator's pod.",
    )
    stages: list[Stage] = Field(default_factory=list, description="Stages, in order.", max_length=MAX_STAGES)
    kpis: KpiThresholds = Field(default_factory=KpiThresholds, description="The KPI board's thresholds.")
    fault_policy: FaultPolicy = Field(default_factory=FaultPolicy, description="Blast-radius limits.")
    server_requests: ServerRequests | None = Field(
        default=None,
        description="The target's request counter: with it, each loaded stage reports retry amplification.",
    )
    autoscaling: Autoscaling | None = Field(
        default=None, description="The workload a HorizontalPodAutoscaler scales: its lag is reported."
    )
    dry_run: bool = Field(default=False, description="Plan and report the faults without touching anything.")
    abort: bool = Field(default=False, description="Stop the drill and revert every injected fault now.")


class FaultRecord(ApiModel):
    """One journal entry, written before the fault is applied; ``undo`` holds what reverting needs."""

    id: str = Field(description="Identifies the fault within the run.")
    stage: str = Field(description="The stage it belongs to.")
    kind: str = Field(description="Fault kind.")
    target: str = Field(description="What it acts on (pods, nodes, a workload, a ConfigMap).")
    phase: FaultPhase = Field(description="Planned, Injected, Reverted, RevertFailed or Skipped.")
    undo: str = Field(default="", description="JSON: what reverting restores.")
    planned_at: str = Field(description="When it was journaled (RFC 3339).")
    injected_at: str | None = Field(default=None, description="When it was applied.")
    reverted_at: str | None = Field(default=None, description="When it was undone.")
    revert_tries: int | None = Field(
        default=None,
        ge=0,
        description="Later rounds that tried to revert it and failed (RevertFailed is retried).",
    )
    message: str = Field(
        default="", description="What happened, or why it was skipped or could not be undone."
    )


MAX_WINDOWS = 120  # per stage in status; a longer stage keeps its first ones (its totals stay whole)


class WindowSummary(ApiModel):
    """One window of a stage's load: what the timeline of ``mcp-operator report`` draws."""

    offset_seconds: float = Field(ge=0, description="Start of the window, from the stage's start.")
    p99_ms: float | None = Field(
        default=None, description="P99 latency in the window (none: nothing completed)."
    )
    completed: int = Field(default=0, ge=0, description="Requests completed in the window.")
    errors: int = Field(default=0, ge=0, description="Requests sent in the window that failed.")
    dropped: int = Field(default=0, ge=0, description="Arrivals in the window the load generator never sent.")


class StageClassSummary(ApiModel):
    """One request class of a stage's traffic mix."""

    name: str = Field(description="The class.")
    completed: int = Field(default=0, ge=0, description="Its requests that completed.")
    errors: int = Field(default=0, ge=0, description="Its requests that failed.")
    p50_ms: str = Field(default="", description="Its median latency.")
    p99_ms: str = Field(default="", description="Its P99 latency.")


class StageSummary(ApiModel):
    name: str = Field(description="Stage name.")
    phase: Literal["Pending", "Running", "Done", "Skipped", "Stopped"] = Field(
        description="Where the stage is (Stopped: running when the drill was aborted or interrupted)."
    )
    requested: str = Field(default="", description="Requested load (rate or concurrency).")
    achieved_rps: str = Field(default="", description="Completed requests per second.")
    p50_ms: str = Field(default="", description="Median latency over the stage.")
    p99_ms: str = Field(default="", description="P99 latency over the stage.")
    errors: int = Field(default=0, ge=0, description="Requests sent that failed.")
    dropped: int = Field(
        default=0, ge=0, description="Arrivals the load generator never sent (no evidence about the service)."
    )
    client_bound: str | None = Field(
        default=None,
        description="Why the load generator was the limit in this stage (then Inconclusive "
        "LoadGeneratorSaturated).",
        max_length=1024,
    )
    p99_jump_at_seconds: float | None = Field(
        default=None,
        description="When within the stage P99 first rose past the jump factor, or its failures passed 1 %.",
    )
    classes: list[StageClassSummary] = Field(
        default_factory=list, description="A mix's classes, each with its own figures.", max_length=16
    )
    load_from: str | None = Field(
        default=None,
        description="What generated the stage's load: the MCPBenchmark and its shards (spec.drill.shards); "
        "unset: the operator's pod.",
        max_length=512,
    )
    started_at: str | None = Field(default=None, description="When the stage started (RFC 3339).")
    ended_at: str | None = Field(default=None, description="When the stage ended (RFC 3339).")
    windows: list[WindowSummary] = Field(
        default_factory=list,
        description="The stage's load window by window (P99 and errors over time).",
        max_length=MAX_WINDOWS,
    )


class KpiRow(ApiModel):
    name: str = Field(description="KPI, e.g. healthSuccessRatio, hotUpdateSeconds, recoverySeconds.")
    verdict: Verdict = Field(description="Pass (✓), Warn (!), Fail (✗), Inconclusive (no data) or Error.")
    mark: str = Field(description="✓, !, ✗ or ?.")
    measured: str = Field(description="The value measured, or why there is none.")
    threshold: str = Field(description="The limit.")
    warn: str = Field(default="", description="The warn band, if any.")
    evidence: str = Field(default="", description="Which stage and fault it comes from.")
    fault: str | None = Field(
        default=None, description="The fault a per-fault row judges (recoverySeconds: one row per fault)."
    )
