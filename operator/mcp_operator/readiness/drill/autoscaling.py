"""The HorizontalPodAutoscaler's response lag: the drill samples the autoscaler that targets the
workload (its ``status.desiredReplicas`` and ScalingActive condition) and the workload's Ready
pods (their Ready condition) all along, then measures, for each stage whose load is higher than
the previous one's, the seconds from the stage's start to the desired replicas rising, and to
that many pods being Ready.

No autoscaler, no rise of the load, an autoscaler that cannot read its metric or never asked
for more replicas: each is an Inconclusive row that says which, never a pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mcp_checks.api import Verdict

from ...api.drill import KpiThresholds
from .kpi import KpiResult, seconds_kpi

INTERVAL_S = 0.5
REQUEST_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ScaleSample:
    at: float  # time.time()
    hpa: str | None  # the autoscaler that targets the workload; None: none did
    desired: int | None
    ready: int
    blind: str = ""  # why it cannot scale (ScalingActive False: reason and message)


@dataclass(frozen=True)
class LoadRise:
    stage: str
    at: float  # time.time() of the stage's start


@dataclass
class ScaleRecord:
    samples: list[ScaleSample] = field(default_factory=list)


def _targets(hpa: Any, workload: str) -> bool:
    ref = hpa.spec.scale_target_ref if hpa.spec else None
    return ref is not None and ref.kind == "Deployment" and ref.name == workload


def _blind(hpa: Any) -> str:
    for cond in (hpa.status.conditions if hpa.status else None) or []:
        if cond.type == "ScalingActive" and cond.status == "False":
            return f"{cond.reason}: {cond.message}"
    return ""


def _ready(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp is not None:
        return False
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


async def sample(api: client.ApiClient, namespace: str, workload: str) -> ScaleSample:
    """One reading of the autoscaler and the workload's pods."""
    scaling, apps, core = client.AutoscalingV2Api(api), client.AppsV1Api(api), client.CoreV1Api(api)
    at = time.time()
    listed = await asyncio.to_thread(
        scaling.list_namespaced_horizontal_pod_autoscaler, namespace, _request_timeout=REQUEST_TIMEOUT_S
    )
    hpa = next(
        (h for h in sorted(listed.items, key=lambda h: h.metadata.name) if _targets(h, workload)), None
    )
    ready = 0
    with contextlib.suppress(ApiException):
        deployment = await asyncio.to_thread(
            apps.read_namespaced_deployment, workload, namespace, _request_timeout=REQUEST_TIMEOUT_S
        )
        labels = (deployment.spec.selector.match_labels or {}) if deployment.spec.selector else {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = await asyncio.to_thread(
            core.list_namespaced_pod, namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT_S
        )
        ready = sum(_ready(p) for p in pods.items)
    if hpa is None:
        return ScaleSample(at, None, None, ready)
    desired = hpa.status.desired_replicas if hpa.status else None
    return ScaleSample(at, hpa.metadata.name, desired, ready, _blind(hpa))


async def watch(
    api: client.ApiClient, namespace: str, workload: str, record: ScaleRecord, stop: asyncio.Event
) -> None:
    """Sample until ``stop``; a failed reading is skipped (the next one comes half a second later)."""
    while not stop.is_set():
        # an API hiccup must not end the drill; a gap only coarsens the figure
        with contextlib.suppress(Exception):
            record.samples.append(await sample(api, namespace, workload))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), INTERVAL_S)


@dataclass(frozen=True)
class Lag:
    rise: LoadRise
    before: int  # desired replicas when the load rose
    raised_to: int | None
    scale_up_s: float | None
    ready_s: float | None


def lags(samples: Sequence[ScaleSample], rises: Sequence[LoadRise]) -> list[Lag]:
    """For each rise of the load: when the desired replicas first went above what they were,
    and when that many pods were Ready (None: not within the record)."""
    out = []
    for rise in rises:
        earlier = [s for s in samples if s.at <= rise.at and s.desired is not None]
        later = [s for s in samples if s.at > rise.at and s.desired is not None]
        if not earlier and later:
            earlier = later[:1]
        if not earlier:
            continue
        before = earlier[-1].desired or 0
        up = next((s for s in later if (s.desired or 0) > before), None)
        if up is None:
            out.append(Lag(rise, before, None, None, None))
            continue
        target = up.desired or 0
        ready = next((s for s in later if s.at >= up.at and s.ready >= target), None)
        out.append(Lag(rise, before, target, up.at - rise.at, None if ready is None else ready.at - rise.at))
    return out


def hpa_kpis(
    samples: Sequence[ScaleSample], rises: Sequence[LoadRise], workload: str, t: KpiThresholds
) -> list[KpiResult]:
    """``hpaScaleUpSeconds`` and ``hpaReadySeconds``, or one Inconclusive row saying what is missing."""
    name = "hpaScaleUpSeconds"
    limit = f"<= {t.hpa_scale_up_seconds:g} s"
    seen = [s for s in samples if s.hpa is not None]
    if not seen:
        why = f"no HorizontalPodAutoscaler of this namespace targets Deployment {workload}"
        return [KpiResult(name, Verdict.INCONCLUSIVE, "NoHorizontalPodAutoscaler", why, limit)]
    if not rises:
        why = "no stage loads the target more than the one before it"
        return [KpiResult(name, Verdict.INCONCLUSIVE, "LoadNeverRose", why, limit)]
    measured = lags(seen, rises)
    risen = [lag for lag in measured if lag.raised_to is not None]
    if not risen:
        blind = next((s.blind for s in reversed(seen) if s.blind), "")
        hpa = seen[-1].hpa
        if blind:
            why = f"HorizontalPodAutoscaler {hpa} cannot scale: {blind}"
            return [KpiResult(name, Verdict.INCONCLUSIVE, "AutoscalerBlind", why, limit)]
        desired = seen[-1].desired
        why = (
            f"HorizontalPodAutoscaler {hpa} kept {desired} desired replicas: the load never passed its target"
        )
        return [KpiResult(name, Verdict.INCONCLUSIVE, "NoScaleUp", why, limit)]
    hpa = seen[-1].hpa
    up_values = [(_evidence(hpa, lag), lag.scale_up_s) for lag in risen]
    ready_values = [(_evidence(hpa, lag), lag.ready_s) for lag in risen]
    rows = [
        seconds_kpi(name, up_values, t.hpa_scale_up_seconds, t.hpa_scale_up_seconds_warn, "NeverScaledUp"),
        seconds_kpi(
            "hpaReadySeconds", ready_values, t.hpa_ready_seconds, t.hpa_ready_seconds_warn, "NeverReady"
        ),
    ]
    return [row for row in rows if row is not None]


def _evidence(hpa: str | None, lag: Lag) -> str:
    return (
        f"HorizontalPodAutoscaler {hpa}: {lag.before} to {lag.raised_to} replicas in stage {lag.rise.stage}"
    )


def load_rises(stages: Sequence[tuple[str, float, float]]) -> list[LoadRise]:
    """(stage, start time, load) in order: the stages whose load is above the previous stage's."""
    rises = []
    previous: float | None = None
    for stage, started, load in stages:
        if previous is not None and load > previous:
            rises.append(LoadRise(stage, started))
        previous = load
    return rises
