"""The checks a readiness spec asks for, built from its camelCase ``spec.checks`` as a manifest
or the API server holds it, and run together.

One builder serves the operator (which passes the validated spec) and ``mcp-check -f`` (which
reads a manifest file), so both run exactly the same assertions. The checks of one evaluation
run concurrently, each within its own timeout: one slow source does not hold the others up, and
a check that times out or raises becomes an Inconclusive or Error row, never a missing one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from kubernetes import client
from pydantic import BaseModel, ValidationError

from . import specs
from .config import (
    ArgoApplicationRef,
    ConfigConsistencySpec,
    WorkloadKind,
    is_serving,
    label_selector,
    run_config_consistency,
)
from .defaults import REFERENCE_FILE
from .dialhooks import OPEN, DialHooks
from .drift import (
    ConfigMapRules,
    MetricDriftSpec,
    PrometheusRuleObjects,
    RecordingRule,
    RuleReference,
    RulesFile,
    run_metric_drift,
)
from .health import HealthProbeSpec, run_health_probe
from .manifest import problems
from .specs import HealthProbe, XdsProxies, XdsSync
from .verdict import CheckOutcome, Verdict
from .xds import XdsMemory, XdsSource, XdsSyncSpec, measure_convergence, run_xds_sync

HealthProbeRunner = Callable[[HealthProbeSpec], Awaitable[CheckOutcome]]
CHECK_KEYS = {
    "healthProbe": "health-probe",
    "xdsSync": "xds-sync",
    "configConsistency": "config-consistency",
    "metricDrift": "metric-drift",
}
SOURCE_KINDS = {"csds": "csds", "syncz": "syncz", "envoyAdmin": "envoy_admin"}
_M = TypeVar("_M", bound=BaseModel)
SLACK_S = 5.0  # beyond a check's own timeouts, before the suite gives up on it


class SpecError(ValueError):
    """A ``spec.checks`` entry that cannot be turned into a check (a usage error)."""


@dataclass(frozen=True)
class CheckContext:
    """What checks need from where they run: the namespace, the target's base URL, a Kubernetes
    client (config consistency, proxies selected by label), and how to run a probe round."""

    namespace: str
    base_url: str | None = None
    api_client: client.ApiClient | None = None
    health_probe: HealthProbeRunner = run_health_probe
    # waits for capacity to probe a URL (the operator's bounded prober); the wait is queue time,
    # kept out of the check's timeout and duration
    probe_slot: Callable[[str], AbstractAsyncContextManager[None]] = lambda url: contextlib.nullcontext()
    # how every check connects: the operator injects its target policy, checked on the address
    # each connection is opened to
    dial: DialHooks = OPEN
    # what the xDS check's earlier looks saw (the operator keeps it in the gate's status; the
    # CLI seeds it with --changed-at); None: this look is the first
    xds_memory: XdsMemory | None = None


@dataclass(frozen=True)
class PlannedCheck:
    name: str
    timeout_s: float
    run: Callable[[CheckContext], Awaitable[CheckOutcome]]
    admit: Callable[[CheckContext], AbstractAsyncContextManager[None]] | None = None


def _join(base: str | None, path: str) -> str:
    if base is None:
        raise SpecError("healthProbe needs a target URL (spec.target.url, or --url)")
    parts = urlsplit(base)  # the path into the URL's path: after a #fragment it is never requested
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def health_probe(entry: Mapping[str, Any] | HealthProbe) -> PlannedCheck:
    probe = entry if isinstance(entry, HealthProbe) else _typed(HealthProbe, entry, "healthProbe")
    timeout_ms = float(probe.timeout_ms)

    def spec_for(ctx: CheckContext) -> HealthProbeSpec:
        return HealthProbeSpec.from_spec(
            probe, _join(ctx.base_url, probe.path), socket_factory=ctx.dial.socket_factory
        )

    async def run(ctx: CheckContext) -> CheckOutcome:
        return await ctx.health_probe(spec_for(ctx))

    # a round of N requests at concurrency C, each bounded by the per-request timeout
    requests, concurrency = probe.requests, probe.concurrency
    bound = (requests / concurrency + 1) * timeout_ms / 1000.0

    def admit(ctx: CheckContext) -> AbstractAsyncContextManager[None]:
        return ctx.probe_slot(spec_for(ctx).url)

    return PlannedCheck(CHECK_KEYS["healthProbe"], bound + SLACK_S, run, admit)


def _typed(model: type[_M], entry: Mapping[str, Any], key: str) -> _M:
    """A manifest's check entry as its typed spec; an invalid one is a SpecError."""
    try:
        return model.model_validate(dict(entry))
    except ValidationError as exc:
        raise SpecError("; ".join(problems(exc, f"checks.{key}"))) from exc


async def _pods_to_proxies(ctx: CheckContext, proxies: XdsProxies | None) -> tuple[str, ...] | None:
    """Node IDs the target's proxies should have: listed, or from the ready pods a label
    selector or a Service's selector picks (``{pod}``, ``{namespace}`` and ``{ip}`` in
    ``nodeIdTemplate``): the cluster says who should be there, not the answer judged."""
    if proxies is None:
        return None
    if proxies.ids is not None:
        return tuple(str(p) for p in proxies.ids)
    labels: dict[str, str] = dict(proxies.match_labels or {})
    service = proxies.service
    if not labels and not service:
        return None
    if ctx.api_client is None:
        raise SpecError("xdsSync.proxies needs a Kubernetes client (a kubeconfig) to find the pods")
    core = client.CoreV1Api(ctx.api_client)
    if service:
        svc = await asyncio.to_thread(core.read_namespaced_service, str(service), ctx.namespace)
        labels = dict(svc.spec.selector or {})
        if not labels:
            raise SpecError(f"Service {ctx.namespace}/{service} has no selector, so it names no pods")
    selector = label_selector({"matchLabels": labels})
    listed = await asyncio.to_thread(core.list_namespaced_pod, ctx.namespace, label_selector=selector)
    pods: list[dict[str, Any]] = ctx.api_client.sanitize_for_serialization(listed.items)
    template = proxies.node_id_template
    # Running and serving (Ready, not terminating): a pod still starting, or failing its
    # probes, has no proxy that must be synced yet
    return tuple(
        template.format(pod=p["metadata"]["name"], namespace=ctx.namespace, ip=p["status"].get("podIP") or "")
        for p in pods
        if p["status"].get("phase") == "Running" and is_serving(p)
    )


def xds_sync(entry: Mapping[str, Any] | XdsSync) -> PlannedCheck:
    xds = entry if isinstance(entry, XdsSync) else _typed(XdsSync, entry, "xdsSync")
    sources = tuple(XdsSource(SOURCE_KINDS[s.kind], s.address) for s in xds.sources)  # type: ignore[arg-type]
    timeout_s, wait_s = xds.timeout_seconds, xds.wait_seconds

    async def run(ctx: CheckContext) -> CheckOutcome:
        spec = XdsSyncSpec(
            sources=sources,
            expected_proxies=await _pods_to_proxies(ctx, xds.proxies),
            min_proxies=xds.min_proxies,
            types=tuple(xds.types),
            expected_version=xds.expected_version,
            grace_s=xds.grace_seconds,
            timeout_s=timeout_s,
            dial=ctx.dial,
        )
        if wait_s > 0:  # poll until converged, any Fail, or the wait is over
            return (await measure_convergence(spec, timeout_s=wait_s, memory=ctx.xds_memory)).outcome
        return await run_xds_sync(spec, ctx.xds_memory)

    return PlannedCheck(CHECK_KEYS["xdsSync"], timeout_s + wait_s + SLACK_S, run)


def config_consistency(entry: Mapping[str, Any] | specs.ConfigConsistency) -> PlannedCheck:
    if isinstance(entry, specs.ConfigConsistency):
        config = entry
    else:
        config = _typed(specs.ConfigConsistency, entry, "configConsistency")
    if not config.config_maps and not config.secrets:
        raise SpecError("checks.configConsistency: name at least one ConfigMap or Secret to hash")
    app = config.application
    application = (
        None
        if app is None
        else ArgoApplicationRef(
            name=app.name,
            namespace=app.namespace,
            expected_revision=app.expected_revision,
            gate_wave=app.gate_wave,
            gate_resource=app.gate_resource,
        )
    )

    async def run(ctx: CheckContext) -> CheckOutcome:
        if ctx.api_client is None:
            raise SpecError("configConsistency needs a Kubernetes client (a kubeconfig)")
        spec = ConfigConsistencySpec(
            namespace=ctx.namespace,
            workload=config.workload.name,
            workload_kind=WorkloadKind(config.workload.kind),
            config_maps=tuple(config.config_maps),
            secrets=tuple(config.secrets),
            annotation=config.annotation,
            application=application,
            timeout_s=config.timeout_seconds,
        )
        return await run_config_consistency(spec, ctx.api_client)

    return PlannedCheck(CHECK_KEYS["configConsistency"], config.timeout_seconds + SLACK_S, run)


ReferenceFor = Callable[[CheckContext], RuleReference]


def _drift_reference(ref: specs.RuleReference | None, file: Path | None) -> ReferenceFor | None:
    """``metricDrift.reference``: exactly one of ``prometheusRules`` and ``configMap`` (their
    namespaces default to the check's), or the CLI's rules file instead."""
    if file is not None:
        if ref is not None:
            raise SpecError("metricDrift: set one of reference and a reference file")
        return lambda _ctx: RulesFile(file)
    if ref is None:
        return None
    if (ref.prometheus_rules is None) == (ref.config_map is None):
        raise SpecError("checks.metricDrift.reference: set exactly one of prometheusRules and configMap")

    def api(ctx: CheckContext) -> client.ApiClient:
        if ctx.api_client is None:
            raise SpecError("metricDrift.reference needs a Kubernetes client (a kubeconfig)")
        return ctx.api_client

    config_map, rules = ref.config_map, ref.prometheus_rules
    if config_map is not None:
        return lambda ctx: ConfigMapRules(
            api(ctx), config_map.namespace or ctx.namespace, config_map.name, config_map.key
        )
    assert rules is not None
    if rules.name and rules.selector:
        raise SpecError("checks.metricDrift.reference.prometheusRules: set at most one of name and selector")
    selector = dict(rules.selector or {})
    return lambda ctx: PrometheusRuleObjects(
        api(ctx), rules.namespace or ctx.namespace, rules.name or None, selector
    )


def metric_drift(entry: Mapping[str, Any] | specs.MetricDrift) -> PlannedCheck:
    file: Path | None = None
    if isinstance(entry, specs.MetricDrift):
        drift = entry
    else:
        given = entry.get(REFERENCE_FILE)
        file = None if given is None else Path(str(given))
        rest = {k: v for k, v in entry.items() if k != REFERENCE_FILE}
        drift = _typed(specs.MetricDrift, rest, "metricDrift")
    try:
        spec = MetricDriftSpec(
            prometheus_url=drift.prometheus_url,
            rules=tuple(RecordingRule(r.record, r.expr) for r in drift.rules),
            threshold=drift.threshold,
            warn_threshold=drift.warn_threshold,
            window_s=drift.window_seconds,
            points=drift.points,
            timeout_s=drift.timeout_seconds,
        )
    except ValueError as exc:
        raise SpecError(f"checks.metricDrift: {exc}") from exc
    reference = _drift_reference(drift.reference, file)

    async def run(ctx: CheckContext) -> CheckOutcome:
        dialled = replace(spec, dial=ctx.dial)
        if reference is None:
            return await run_metric_drift(dialled)
        return await run_metric_drift(replace(dialled, reference=reference(ctx)))

    # the reference read, the rules and Prometheus's clock, then each instant's queries
    return PlannedCheck(CHECK_KEYS["metricDrift"], spec.timeout_s * (spec.points + 4) + SLACK_S, run)


BUILDERS: dict[str, Callable[[Any], PlannedCheck]] = {
    "healthProbe": health_probe,
    "xdsSync": xds_sync,
    "configConsistency": config_consistency,
    "metricDrift": metric_drift,
}


def plan_checks(checks: Mapping[str, Any] | BaseModel, only: set[str] | None = None) -> list[PlannedCheck]:
    """The enabled checks of ``spec.checks``, optionally only some of them (by camelCase key).
    ``checks`` is the typed model of ``spec.checks`` (the operator's validated spec: each check
    its ``mcp_checks.specs`` model, a null one off), or a manifest's mapping, whose entries are
    read as strictly as the API server reads them. The health probe is on unless it says
    ``enabled: false`` or is null, as the operator's API has it; the others run where present."""
    planned = []
    for key, entry in _entries(checks).items():
        if key not in BUILDERS:
            raise SpecError(f"spec.checks.{key}: unknown check (known: {', '.join(BUILDERS)})")
        enabled = getattr(entry, "enabled", True) if isinstance(entry, BaseModel) else _enabled(entry)
        if not enabled or (only is not None and key not in only):
            continue
        planned.append(BUILDERS[key](entry))
    return planned


def _entries(checks: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """Each check under its camelCase key; a typed model's checks by their own aliases, the
    absent ones left out (its probe stays, null when it is off)."""
    if not isinstance(checks, BaseModel):
        return {"healthProbe": {}, **checks}
    fields = type(checks).model_fields
    typed = {field.alias or name: getattr(checks, name) for name, field in fields.items()}
    return {key: entry for key, entry in typed.items() if entry is not None or key == "healthProbe"}


def _enabled(entry: Mapping[str, Any] | None) -> bool:
    return entry is not None and entry.get("enabled") is not False


async def _guarded(check: PlannedCheck, ctx: CheckContext) -> CheckOutcome:
    """The check's row, with how long it took once admitted (waiting for capacity is queue time:
    neither its duration nor against its timeout)."""
    try:
        admission = check.admit(ctx) if check.admit is not None else contextlib.nullcontext()
    except SpecError as exc:
        return CheckOutcome(check.name, Verdict.ERROR, "CheckMisconfigured", str(exc))
    async with admission:
        started = time.monotonic()
        outcome = await _outcome_of(check, ctx)
        outcome.duration_s = time.monotonic() - started
    return outcome


async def _outcome_of(check: PlannedCheck, ctx: CheckContext) -> CheckOutcome:
    """A check that overruns or raises is a row saying so: never missing, never a pass."""
    try:
        return await asyncio.wait_for(check.run(ctx), check.timeout_s)
    except TimeoutError:
        return CheckOutcome(
            check.name,
            Verdict.INCONCLUSIVE,
            "CheckTimedOut",
            f"{check.name} did not finish within {check.timeout_s:g}s",
        )
    except SpecError as exc:
        return CheckOutcome(check.name, Verdict.ERROR, "CheckMisconfigured", str(exc))
    except Exception as exc:  # reported as a row and counted by the caller, never swallowed
        return CheckOutcome(check.name, Verdict.ERROR, "CheckFailed", f"{type(exc).__name__}: {exc}")


async def run_checks(planned: list[PlannedCheck], ctx: CheckContext) -> list[CheckOutcome]:
    """Every planned check at once; rows come back in plan order."""
    return list(await asyncio.gather(*(_guarded(check, ctx) for check in planned)))
