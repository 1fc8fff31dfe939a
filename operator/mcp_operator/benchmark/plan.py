"""The plan each shard runs, derived from the spec and checked before any Job exists: the
target resolved and free of credentials, the model present where the backend needs one, the
engine able to do it. Header values from Secrets are not in the plan: the Job passes them by
reference and the shard adds them at run time."""

from __future__ import annotations

import fnmatch
import math
from decimal import Decimal, Overflow
from typing import Any

from mcp_bench.api import ObserverArgError, PlanError, RunPlan, build_observers, plan_feature_problem

from ..api.benchmark import MCPBenchmarkSpec
from ..api.runner import RunnerSpec
from ..settings import OperatorSettings
from ..targets import ServiceExists, SpecProblem, credentials_problem, join_url, resolve_url
from ..targets.policy import TargetPolicy
from .observe import observe_plan, observe_problem
from .search import search_plan, search_problem
from .workload import workload_payload

HEADER_BACKENDS = ("http", "openai", "openai-chat")
CREDENTIALS_HINT = "send them as spec.target.headers with valueFrom.secretKeyRef"
# Suffixes of a Kubernetes quantity as multipliers (a CPU request is usually whole or milli).
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(1000),
}
MAX_WORKERS = 64


def workers_for_cpu(cpu: str, engine: str) -> int:
    """Client processes per shard: one per whole core of the pod's CPU request (at least one), so
    a shard given the cores to keep up uses them; external engines run their own processes."""
    if engine != "builtin":
        return 1
    number = cpu.rstrip("numk")
    try:
        cores = min(Decimal(MAX_WORKERS), Decimal(number) * _SUFFIX.get(cpu[len(number) :], Decimal(1)))
        return max(1, math.floor(cores))
    except Overflow:  # a request beyond any machine ("9e999999"): as many as a shard takes
        return MAX_WORKERS
    except ArithmeticError:  # no number Decimal reads (the quantity's pattern lets through more)
        return 1


def plan_from_spec(spec: MCPBenchmarkSpec, url: str, benchmark: str) -> RunPlan:
    """The plan each shard runs: the spec's load per shard, against the resolved URL."""
    load = spec.load
    levels: dict[str, Any] = {
        "arrival": load.arrival,
        "overload": load.overload,
        "ramp_s": load.ramp_seconds,
    }
    if load.connections is not None:
        levels["connections"] = load.connections
    if load.concurrency is not None:
        levels["concurrency"] = load.concurrency
    else:
        levels["rate"] = load.rate
    stage: dict[str, Any] = {"warmup_s": load.warmup_seconds}
    if load.duration_seconds is not None:
        stage["duration_s"] = load.duration_seconds
    if load.requests is not None:
        stage["requests"] = load.requests
    slo = {
        key: value
        for key, value in {
            "latency_p99_ms": spec.slo.latency_p99_ms,
            "latency_p95_ms": spec.slo.latency_p95_ms,
            "ttft_p99_ms": spec.slo.ttft_p99_ms,
            # judged on the merged levels, whose throughput is cluster-wide, as the spec says
            "throughput_rps": spec.slo.throughput_rps,
            "max_error_rate": spec.slo.max_error_rate,
        }.items()
        if value is not None
    }
    target = join_url(url, spec.target.path) if spec.target.backend == "http" else url
    return RunPlan.from_dict(
        {
            "url": target,
            "engine": load.engine,
            "backend": spec.target.backend,
            "model": spec.target.model,
            "levels": levels,
            "stage": stage,
            "request_timeout_s": load.request_timeout_seconds,
            "payload": {
                "headers": {h.name: h.value for h in spec.target.headers if h.value is not None},
                **workload_payload(spec),
            },
            "slo": slo,
            "labels": {"benchmark": benchmark},
            "observe": observe_plan(spec),
            "workers": workers_for_cpu(spec.runner.cpu, load.engine),
            "consistency": None if spec.consistency is None else spec.consistency.plan(),
            "search": search_plan(spec),
        },
        source="spec",
    )


def model_problem(spec: MCPBenchmarkSpec) -> SpecProblem | None:
    """Every backend but plain HTTP names a model: the target's, or in a mix each class's own
    (falling back to the target's)."""
    target = spec.target
    if target.backend == "mix":
        classes = spec.workload.classes if spec.workload is not None else []
        missing = [
            c.name for c in classes if c.backend not in (None, "http") and not (c.model or target.model)
        ]
        if missing:
            return SpecProblem(
                "ModelRequired", f"backend mix: classes {missing} need a model (theirs or spec.target.model)"
            )
        return None
    if target.backend != "http" and not target.model:
        return SpecProblem("ModelRequired", f"backend {target.backend} needs spec.target.model")
    return None


def runner_problem(runner: RunnerSpec, settings: OperatorSettings) -> SpecProblem | None:
    """Whoever can create an MCPBenchmark must not run any image under any account through the
    operator: a runner image or service account other than the operator's own needs its allow-list."""
    image, account = runner.image, runner.service_account_name
    if image and image != settings.runner_image and not _allowed(image, settings.runner_image_allow):
        return SpecProblem(
            "RunnerNotAllowed",
            f"spec.runner.image {image} is not the operator's runner image and MCP_RUNNER_IMAGE_ALLOW "
            "does not allow it",
        )
    if account and not _allowed(account, settings.runner_account_allow):
        return SpecProblem(
            "RunnerNotAllowed",
            f"spec.runner.serviceAccountName {account} is not allowed by MCP_RUNNER_SERVICE_ACCOUNT_ALLOW "
            "(unset, the shards run under the run's own account)",
        )
    return None


def _allowed(value: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


def url_fields(spec: MCPBenchmarkSpec) -> list[tuple[str, str]]:
    """(field path, value) of the target's URL and path and of every image urlBase: what the Job
    and the plan ConfigMap copy (spec.observe's URLs are checked with its other rules)."""
    fields = [("spec.target.path", spec.target.path)]
    if spec.target.url:
        fields.insert(0, ("spec.target.url", spec.target.url))
    workload = spec.workload
    if workload is None:
        return fields
    if workload.images is not None and workload.images.url_base:
        fields.append(("spec.workload.images.urlBase", workload.images.url_base))
    fields += [
        (f"spec.workload.classes[{i}].images.urlBase", c.images.url_base)
        for i, c in enumerate(workload.classes)
        if c.images is not None and c.images.url_base
    ]
    return fields


async def prepare_plan(
    spec: MCPBenchmarkSpec,
    namespace: str,
    benchmark: str,
    exists: ServiceExists,
    policy: TargetPolicy | None = None,
) -> RunPlan | SpecProblem:
    """The plan the shards run, or why this spec cannot run (checked before any Job exists).

    The target and spec.observe's sources are judged here but dialled by the shards, pods in the
    cluster: a cluster-only name (``<svc>.<ns>.svc``) that an operator running outside the cluster
    cannot resolve is theirs to resolve (``by_pods``), not ``TargetUnresolvable``. A user who
    runs the operator with a kubeconfig expects a benchmark of an in-cluster Service to run as it
    would with the operator in the cluster, and the shards judge every connection they open by
    the same target policy (``MCP_DIAL_GUARD``), so nothing is dialled that the policy forbids."""
    # the CRD refuses these already; never copy one into a Job if an older CRD let it through
    leaking = credentials_problem(url_fields(spec), CREDENTIALS_HINT)
    if leaking is not None:
        return leaking
    if spec.target.headers and spec.target.backend not in HEADER_BACKENDS:
        return SpecProblem(
            "HeadersUnsupported",
            f"spec.target.headers apply to backends {', '.join(HEADER_BACKENDS)}, not {spec.target.backend}",
        )
    if (searching := search_problem(spec)) is not None:
        return searching
    policy = policy or TargetPolicy.from_env()
    target = spec.target
    url = await resolve_url(target.url, target.service_ref, namespace, exists, policy, by_pods=True)
    if isinstance(url, SpecProblem):
        return url
    if (unmodelled := model_problem(spec)) is not None:
        return unmodelled
    observing = await observe_problem(spec, policy, namespace=namespace, exists=exists)
    if observing is not None:
        return observing
    try:
        plan = plan_from_spec(spec, url, benchmark)
        build_observers(plan)  # the shards build the same; a source that cannot be read fails here
    except (PlanError, ObserverArgError) as exc:
        return SpecProblem("InvalidPlan", str(exc))
    problem = plan_feature_problem(plan)  # the engine's own limits; its tool is the runner image's business
    if problem is not None:
        return SpecProblem("UnsupportedByEngine", f"spec.load.engine {spec.load.engine}: {problem}")
    return plan
