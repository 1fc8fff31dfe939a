"""kopf handlers for MCPReadiness: parse, call the readiness package, write status.

Each round is claimed first (``readiness.claim``) against the object as the API server has it
now, and its verdict is written before the claim is let go, so one generation (or one due
recheck, or one release that ``spec.watch`` saw) is evaluated exactly once however often kopf
replays an older body or a timer ticks.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Coroutine, Mapping
from typing import Any

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from mcp_bench.plan import format_validation_error
from mcp_checks.verdict import CheckOutcome, Verdict

from .. import events, kube, logs, metrics
from ..api.common import GROUP, VERSION
from ..api.readiness import KIND, PLURAL, MCPReadinessSpec, PodReadinessGate
from ..conditions import condition, set_condition, utc_now
from ..readiness import podgate
from ..readiness.claim import Claims, Marker, new_marker, skip_reason
from ..readiness.dialing import dial_problems
from ..readiness.drill import journal
from ..readiness.drill.load import LoadRunner
from ..readiness.drill.registry import Drills
from ..readiness.drill.run import Drill, DrillContext, DrillOutcome, ended_stages, replay_journal
from ..readiness.evaluate import recheck_due, resolve_target, run_checks, semantic_problems
from ..readiness.prober import Prober
from ..readiness.release import (
    Abandoned,
    Observation,
    ReadError,
    Readers,
    precise_now,
    recorded_fingerprint,
    release_record,
    settle,
)
from ..readiness.release import observe as observe_release
from ..readiness.status import (
    STATUS_TOO_LARGE,
    drill_status,
    rejected_status,
    running_status,
    too_large_status,
    verdict_status,
)
from ..settings import OperatorSettings
from ..targets import SpecProblem
from ..unresolved import split
from .common import about_object, reject, wait_for_names

log = logging.getLogger(__name__)
CLAIMS = Claims()
DRILLS = Drills()
LOADS = LoadRunner()
WATCH_INTERVAL_S = 2.0
REVERT_RETRY_INTERVAL_S = 15.0  # a fault whose revert failed is tried again this often
ARGO_APPLICATIONS = ("argoproj.io", "v1alpha1", "applications")  # group, version, plural
_PROBER: Prober | None = None
_SERIALIZER: client.ApiClient | None = None


def prober() -> Prober:
    """One bounded, out-of-process prober per operator process."""
    global _PROBER
    if _PROBER is None:
        settings = OperatorSettings.from_env()
        _PROBER = Prober(settings.max_concurrent_checks, settings.max_checks_per_target)
    return _PROBER


@kopf.on.cleanup()
def stop_prober(**_: Any) -> None:
    if _PROBER is not None:
        _PROBER.close()
    LOADS.close()


async def _write_status(namespace: str, name: str, fields: dict[str, Any]) -> None:
    await kube.patch_status(PLURAL, namespace, name, fields)


async def _settle_drills(uid: str, generation: int, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Before anything else: a drill of an older generation is stopped (it reverts its faults),
    and a journal that shows faults still open with no drill running here (the operator died
    mid-drill) is replayed. Returns the status as it is afterwards."""
    meta = obj["metadata"]
    status: dict[str, Any] = dict(obj.get("status") or {})
    running = DRILLS.get(uid)
    if running is not None and running.generation != generation:
        await DRILLS.stop(uid)
        refreshed = await _fresh(meta["namespace"], meta["name"])
        status = dict((refreshed or {}).get("status") or {})
    if DRILLS.get(uid) is None and journal.open_entries(list(status.get("faults") or [])):
        before = {e["id"] for e in journal.open_entries(list(status["faults"]))}
        faults = await replay_journal(list(status["faults"]), kube.api_client())
        conds = journal.revert_condition(
            list(status.get("conditions") or []), faults, int(meta["generation"]), utc_now()
        )
        await _write_status(meta["namespace"], meta["name"], {"faults": faults, "conditions": conds})
        status.update(faults=faults, conditions=conds)
        for entry in faults:
            if entry["id"] in before and entry.get("phase") == "Reverted":
                events.normal(
                    obj, "FaultReverted", f"{entry['kind']} {entry['id']}: {entry.get('message', '')}"
                )
    return status


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=REVERT_RETRY_INTERVAL_S,
    initial_delay=REVERT_RETRY_INTERVAL_S,
    when=lambda status, **_: any(f.get("phase") == "RevertFailed" for f in status.get("faults") or []),
)
@metrics.counted_errors("retry_reverts")
@about_object
async def retry_failed_reverts(meta: kopf.Meta, **_: Any) -> None:
    """A fault whose revert failed is tried again until it is reverted, also when nothing else
    happens to the object (a drill that ended with one, a replay that failed)."""
    async with CLAIMS.lock(str(meta["uid"])):
        obj = await _fresh(meta["namespace"], meta["name"])
        if obj is not None:
            await _settle_drills(str(meta["uid"]), int(obj["metadata"]["generation"]), obj)


@kopf.on.delete(GROUP, VERSION, PLURAL, when=lambda spec, **_: bool(spec.get("drill")))
@metrics.counted_errors("revert_on_delete")
@about_object
async def revert_on_delete(meta: kopf.Meta, status: kopf.Status, body: kopf.Body, **_: Any) -> None:
    """A deleted drill stops at once and every fault it injected is reverted before the
    finalizer lets the object go; a fault that cannot be reverted keeps it (retried) until it is,
    or until a person sets the release annotation, which is announced with what is left."""
    await DRILLS.stop(str(meta["uid"]))
    fresh = await _fresh(meta["namespace"], meta["name"])
    faults = list(((fresh or {}).get("status") or status or {}).get("faults") or [])
    if journal.open_entries(faults):
        faults = await replay_journal(faults, kube.api_client())
        await _write_status(meta["namespace"], meta["name"], {"faults": faults})
        left = journal.not_reverted(faults)
        if not left:
            return
        named = ", ".join(f"{e.get('kind')} {e.get('target') or e.get('id')}" for e in left[:8])
        annotations = (fresh or {}).get("metadata", {}).get("annotations") or meta.get("annotations") or {}
        if str(annotations.get(journal.RELEASE_ANNOTATION, "")).lower() == "true":
            events.warning(
                body, "FaultsAbandoned", f"released by {journal.RELEASE_ANNOTATION}; not reverted: {named}"
            )
            return
        events.warning(body, "RevertFailed", f"not reverted yet, retrying: {named}")
        raise kopf.TemporaryError(f"not reverted yet: {named}; retrying", delay=10)


async def _fresh(namespace: str, name: str) -> dict[str, Any] | None:
    """The object as the API server has it now (None once deleted)."""
    try:
        obj: dict[str, Any] = await kube.call(
            kube.custom().get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


def _apps() -> client.AppsV1Api:
    return client.AppsV1Api(kube.api_client())


def _plain(model: Any) -> dict[str, Any]:
    """A client model as the JSON the API server sent (camelCase, no None fields)."""
    global _SERIALIZER
    if _SERIALIZER is None:
        _SERIALIZER = client.ApiClient()
    plain: dict[str, Any] = _SERIALIZER.sanitize_for_serialization(model)
    return plain


async def _read_deployment(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        deployment = await kube.call(_apps().read_namespaced_deployment, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise ReadError(f"Deployment {namespace}/{name}: {exc.status} {exc.reason}") from exc
    return _plain(deployment)


async def _read_application(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        group, version, plural = ARGO_APPLICATIONS
        app: dict[str, Any] = await kube.call(
            kube.custom().get_namespaced_custom_object, group, version, namespace, plural, name
        )
    except ApiException as exc:
        if exc.status == 404:  # also when Argo CD's CRD is not installed
            return None
        raise ReadError(f"Application {namespace}/{name}: {exc.status} {exc.reason}") from exc
    return app


def _readers() -> Readers:
    return Readers(_read_deployment, _read_application)


async def _observe(parsed: MCPReadinessSpec, namespace: str) -> Observation | None:
    return None if parsed.watch is None else await observe_release(parsed.watch, namespace, _readers())


def _running_message(release: Mapping[str, Any]) -> str:
    what = [
        f"{label} {release[key]}"
        for key, label in (
            ("revision", "revision"),
            ("workloadTemplateHash", "template"),
            ("applicationRevision", "Application revision"),
        )
        if release.get(key)
    ]
    message = "checks are running" if not what else f"evaluating release {', '.join(what)}"
    if release.get("workload") or release.get("applicationRevision"):
        message += ": waiting for the release to settle, then the checks run"
    return message


async def _claim(obj: Mapping[str, Any], fields: dict[str, Any]) -> bool:
    """Write the marker (and progress) only if nobody changed the object since we read it."""
    meta = obj["metadata"]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": fields}
    try:
        await kube.call(
            kube.custom().patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            meta["namespace"],
            PLURAL,
            meta["name"],
            body,
        )
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("evaluate_readiness")
@about_object
async def evaluate_readiness(
    spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    generation = int(meta["generation"])
    namespace, name = meta["namespace"], meta["name"]
    async with CLAIMS.lock(str(meta["uid"])):
        obj = await _fresh(namespace, name)
        if obj is None or int(obj["metadata"]["generation"]) != generation:
            return  # deleted, or a newer spec whose own event follows
        status = await _settle_drills(str(meta["uid"]), generation, obj)
        why = skip_reason(status, generation, CLAIMS.running)
        if why is not None:
            log.debug("%s/%s generation %d not evaluated again: %s", namespace, name, generation, why)
            return
        conditions = list(status.get("conditions") or [])
        try:
            parsed = MCPReadinessSpec.model_validate(spec)
        except ValidationError as exc:
            problem = SpecProblem("InvalidSpec", f"spec: {format_validation_error(exc)}")
            _reject(body, patch, conditions, generation, [problem])
            return
        if parsed.suspend:
            patch.status.update({"phase": "Suspended", "observedGeneration": generation})
            return
        if parsed.drill is not None and (parsed.drill.abort or _interrupted(status, generation)):
            release = release_record(parsed, None, "Spec", generation, precise_now())
            _end_drill(body, patch, status, generation, release, aborted=parsed.drill.abort)
            return
        left = journal.not_reverted(list(status.get("faults") or []))
        if parsed.drill is not None and left:  # no new fault while an old one is in place, and no
            await _hold_drill(body, status, generation, left)  # new journal over an open entry
            raise kopf.TemporaryError(
                "an earlier drill's fault is not reverted yet", delay=REVERT_RETRY_INTERVAL_S
            )
        target = await resolve_target(parsed, namespace, kube.service_exists)
        problems = semantic_problems(parsed) + await dial_problems(parsed)
        if isinstance(target, SpecProblem):
            problems.insert(0, target)
        problems, unresolved = split(problems)
        if unresolved and not problems:
            await wait_for_names(body, PLURAL, status, generation, unresolved)
        if problems:
            release = release_record(parsed, None, "Spec", generation, precise_now())
            _reject(body, patch, conditions, generation, problems, release)
            return
        assert isinstance(target, str)
        observation = await _observe(parsed, namespace)
        release = release_record(parsed, observation, "Spec", generation, precise_now())
        now = utc_now()
        marker = new_marker(generation, now, release["fingerprint"])
        progress = running_status(conditions, generation, target, now, _running_message(release))
        if not await _claim(obj, {**progress, "evaluation": marker.to_wire(), "release": release}):
            raise kopf.TemporaryError("the object changed while claiming the evaluation", delay=1)
        evaluation = _evaluate(
            parsed, target, {**status, **progress}, generation, body, marker, announce=True, release=release
        )
        if parsed.drill is None:
            await evaluation
            return
        CLAIMS.running.add(marker.id)  # until the task's own bookkeeping takes over
        task = asyncio.create_task(_drill_task(evaluation, body, generation, marker))
        DRILLS.start(str(meta["uid"]), generation, task)


async def _hold_drill(
    body: kopf.Body, status: Mapping[str, Any], generation: int, left: list[dict[str, Any]]
) -> None:
    named = ", ".join(f"{e.get('kind')} {e.get('target') or e.get('id')}" for e in left[:8])
    message = f"not started: an earlier drill's faults are not reverted yet ({named}); retrying"
    conds = set_condition(
        list(status.get("conditions") or []),
        "Ready",
        False,
        "FaultsNotReverted",
        message,
        generation,
        utc_now(),
    )
    await _write_status(str(body.metadata.namespace), str(body.metadata.name), {"conditions": conds})
    events.warning(body, "FaultsNotReverted", message)


async def _drill_task(
    evaluation: Coroutine[Any, Any, None], body: kopf.Body, generation: int, marker: Marker
) -> None:
    """A drill's evaluation as a task: a failure is logged, counted and written as the verdict
    (the drill has already reverted its faults), never lost with the task."""
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    try:
        await evaluation
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("drill of %s/%s failed", namespace, name)
        metrics.ERRORS.labels("drill").inc()
        now = utc_now()
        message = f"the drill failed: {type(exc).__name__}: {exc}"[:1000]
        fresh = ((await _fresh(namespace, name)) or {}).get("status") or {}
        conds = set_condition(
            list(fresh.get("conditions") or []), "Ready", False, "DrillFailed", message, generation, now
        )
        conds = set_condition(conds, "Complete", True, "DrillFailed", message, generation, now)
        conds = journal.revert_condition(conds, list(fresh.get("faults") or []), generation, now)
        events.warning(body, "DrillFailed", message)
        fields: dict[str, Any] = {
            "stages": ended_stages(list(fresh.get("stages") or [])),
            "phase": "Failed",
            "verdict": "Error",
            "observedGeneration": generation,
            "completedAt": now,
            "release": {"completedAt": now},  # merged into the record the claim wrote
        }
        await _write_status(namespace, name, {**fields, "conditions": conds})
    finally:
        CLAIMS.running.discard(marker.id)


def _interrupted(status: Mapping[str, Any], generation: int) -> bool:
    """A drill of this generation claimed by a process that no longer runs it."""
    marker = status.get("evaluation") or {}
    return status.get("phase") == "Running" and marker.get("generation") == generation


def _end_drill(
    body: kopf.Body,
    patch: kopf.Patch,
    status: Mapping[str, Any],
    generation: int,
    release: Mapping[str, Any],
    *,
    aborted: bool,
) -> None:
    """An aborted drill, or one the operator lost mid-run: its faults are already reverted
    (``_settle_drills``); the run proved nothing, so it is Inconclusive and not Ready. Its
    FaultsReverted condition says what the journal shows, also when nothing was left to replay."""
    reason = "DrillAborted" if aborted else "DrillInterrupted"
    message = (
        "spec.drill.abort is true: the drill stopped and its faults were reverted"
        if aborted
        else "the operator stopped during the drill; its faults were reverted; change the spec to run it "
        "again"
    )
    now = utc_now()
    conds = set_condition(
        list(status.get("conditions") or []), "Ready", False, reason, message, generation, now
    )
    # Complete: the run is over (kubectl wait --for=condition=Complete returns); Ready says how
    conds = set_condition(conds, "Complete", True, reason, message, generation, now)
    conds = journal.revert_condition(conds, list(status.get("faults") or []), generation, now)
    patch.status.update(
        {
            "observedGeneration": generation,
            "phase": "Aborted" if aborted else "Failed",
            "verdict": "Inconclusive",
            "completedAt": now,
            "conditions": conds,
            "stages": ended_stages(list(status.get("stages") or [])),
            "release": {**release, "completedAt": now},
        }
    )
    events.warning(body, reason, message)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=5.0,
    initial_delay=5.0,
    when=lambda spec, status, **_: (
        bool(spec.get("recheckIntervalSeconds")) and status.get("phase") in ("Succeeded", "Failed")
    ),
)
@metrics.counted_errors("recheck_readiness")
@about_object
async def recheck_readiness(spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, **_: Any) -> None:
    """A standing gate: evaluate again once the interval has passed; Ready stays as it was while
    the checks run, so consumers see a change only when the verdict changes."""
    generation = int(meta["generation"])
    async with CLAIMS.lock(str(meta["uid"])):
        obj = await _fresh(meta["namespace"], meta["name"])
        if obj is None or int(obj["metadata"]["generation"]) != generation:
            return
        status: dict[str, Any] = dict(obj.get("status") or {})
        if status.get("observedGeneration") != generation:
            return  # the spec changed; the change handler evaluates it
        try:
            parsed = MCPReadinessSpec.model_validate(spec)
        except ValidationError:
            return  # rejected by the change handler already
        if not recheck_due(parsed, status, dt.datetime.now(dt.UTC)):
            return
        observation = await _observe(parsed, meta["namespace"])
        fingerprint = None if observation is None else observation.fingerprint
        if fingerprint is not None and fingerprint != recorded_fingerprint(status):
            return  # a new release: watch_release evaluates it, with Ready Unknown meanwhile
        target = await resolve_target(parsed, meta["namespace"], kube.service_exists)
        outcomes = None
        if isinstance(target, SpecProblem):
            # a standing gate whose Service went away is not ready, and keeps checking for its return
            outcomes = [CheckOutcome("target", Verdict.ERROR, target.reason, target.message)]
            target = str(status.get("targetUrl") or "")
        now = utc_now()
        release = release_record(parsed, observation, "Recheck", generation, precise_now())
        marker = new_marker(generation, now, fingerprint)
        if not await _claim(obj, {"evaluation": marker.to_wire(), "release": release}):
            return  # changed meanwhile: the next tick looks again
        await _evaluate(
            parsed,
            target,
            {**status, "startedAt": now},
            generation,
            body,
            marker,
            announce=False,
            previous_ready=_ready_status(status),
            outcomes=outcomes,
            release=release,
        )


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=WATCH_INTERVAL_S,
    initial_delay=WATCH_INTERVAL_S,
    when=lambda spec, status, **_: (
        bool(spec.get("watch"))
        and not spec.get("suspend")
        and status.get("phase") in ("Succeeded", "Failed", "Running")
    ),
)
@metrics.counted_errors("watch_release")
@about_object
async def watch_release(spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, **_: Any) -> None:
    """Level-triggered: when what ``spec.watch`` shows (the workload's pod template, the
    Application's synced revision) differs from what the last evaluation recorded, a new release
    is out: claim a round for its fingerprint (Ready turns Unknown) and evaluate it, once. A
    watch round left Running by a failure (nothing runs it any more) is taken over the same way."""
    generation = int(meta["generation"])
    namespace, name = meta["namespace"], meta["name"]
    lock = CLAIMS.lock(str(meta["uid"]))
    if lock.locked():
        return  # a round of this gate runs in this process now
    async with lock:
        obj = await _fresh(namespace, name)
        if obj is None or int(obj["metadata"]["generation"]) != generation:
            return
        status: dict[str, Any] = dict(obj.get("status") or {})
        orphaned = _orphaned_watch_round(status, generation)
        decided = status.get("phase") in ("Succeeded", "Failed")
        if not orphaned and (status.get("observedGeneration") != generation or not decided):
            return  # the change handler's business, or a round in progress
        try:
            parsed = MCPReadinessSpec.model_validate(spec)
        except ValidationError:
            return
        if parsed.watch is None or parsed.suspend or parsed.drill is not None:
            return
        observation = await observe_release(parsed.watch, namespace, _readers())
        fingerprint = observation.fingerprint
        if fingerprint is None or (fingerprint == recorded_fingerprint(status) and not orphaned):
            return
        target = await resolve_target(parsed, namespace, kube.service_exists)
        outcomes = None
        if isinstance(target, SpecProblem):
            outcomes = [CheckOutcome("target", Verdict.ERROR, target.reason, target.message)]
            target = str(status.get("targetUrl") or "")
        release = release_record(parsed, observation, "Watch", generation, precise_now())
        now = utc_now()
        marker = new_marker(generation, now, fingerprint)
        conditions = list(status.get("conditions") or [])
        progress = running_status(conditions, generation, target, now, _running_message(release))
        if not await _claim(obj, {**progress, "evaluation": marker.to_wire(), "release": release}):
            return  # changed meanwhile: the next tick looks again
        log.info(
            "%s/%s: release changed (%s -> %s); evaluating",
            namespace,
            name,
            recorded_fingerprint(status),
            fingerprint,
        )
        await _evaluate(
            parsed,
            target,
            {**status, **progress},
            generation,
            body,
            marker,
            announce=True,
            previous_ready=_ready_status(status),
            outcomes=outcomes,
            release=release,
        )


def _orphaned_watch_round(status: Mapping[str, Any], generation: int) -> bool:
    """A watch round of this generation still marked Running that no task here runs: it failed
    before its verdict (a change handler's round is retried by kopf itself)."""
    marker = status.get("evaluation") or {}
    return (
        status.get("phase") == "Running"
        and (status.get("release") or {}).get("trigger") == "Watch"
        and marker.get("generation") == generation
        and marker.get("id") not in CLAIMS.running
    )


async def _still_wanted(namespace: str, name: str, generation: int) -> bool:
    """The gate still exists with the spec the round judges."""
    obj = await _fresh(namespace, name)
    return obj is not None and int(obj["metadata"]["generation"]) == generation


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=5.0,
    initial_delay=2.0,
    when=lambda spec, status, **_: (
        bool(spec.get("podReadinessGate")) and status.get("phase") in ("Succeeded", "Failed", "Invalid")
    ),
)
@metrics.counted_errors("sync_pod_gate")
@about_object
async def sync_pod_gate(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, patch: kopf.Patch, **_: Any
) -> None:
    """Level-triggered: pods created after the verdict (a rollout) get the gate condition too."""
    try:
        gate = PodReadinessGate.model_validate(spec["podReadinessGate"])
    except ValidationError:
        return  # the change handler has already rejected the spec
    ready = condition(list(status.get("conditions") or []), "Ready") or {}
    gated = await podgate.sync_pods(gate, meta["namespace"], ready, utc_now())
    if status.get("gatedPods") != gated:
        patch.status["gatedPods"] = gated


async def _run_drill(parsed: MCPReadinessSpec, target: str, body: kopf.Body) -> DrillOutcome:
    assert parsed.drill is not None
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    probe = parsed.checks.health_probe
    context = DrillContext(
        namespace=namespace,
        base_url=target,
        health_path=probe.path if probe is not None else "/health",
        api=kube.api_client(),
        write_status=lambda fields: _write_status(namespace, name, fields),
        announce=lambda warning, reason, message: (events.warning if warning else events.normal)(
            body, reason, message
        ),
    )
    return await Drill(parsed.drill, context, LOADS).run()


def _ready_status(status: Mapping[str, Any]) -> str | None:
    ready = condition(list(status.get("conditions") or []), "Ready")
    return None if ready is None else str(ready.get("status"))


async def _evaluate(
    parsed: MCPReadinessSpec,
    target: str,
    previous: Mapping[str, Any],
    generation: int,
    body: kopf.Body,
    marker: Marker,
    **kwargs: Any,
) -> None:
    """One round, its log lines (and those of the tasks it starts) tagged with its id."""
    with logs.evaluation(marker.id):
        await _evaluate_round(parsed, target, previous, generation, body, marker, **kwargs)


async def _evaluate_round(
    parsed: MCPReadinessSpec,
    target: str,
    previous: Mapping[str, Any],
    generation: int,
    body: kopf.Body,
    marker: Marker,
    *,
    announce: bool,
    previous_ready: str | None = None,
    outcomes: list[CheckOutcome] | None = None,
    release: Mapping[str, Any] | None = None,
) -> None:
    """Wait for the watched release to settle (``spec.watch``), run the checks (unless
    ``outcomes`` already says why they cannot run), write the verdict and what it judged while
    the claim is held, count it, and post an event when it is news."""
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    CLAIMS.running.add(marker.id)
    try:
        rollout: list[CheckOutcome] = []
        if outcomes is None and parsed.watch is not None:
            try:
                observation, row = await settle(
                    parsed.watch, namespace, _readers(), lambda: _still_wanted(namespace, name, generation)
                )
            except Abandoned:
                log.info("%s/%s changed or went away while its release settled", namespace, name)
                return
            rollout = [row]
            if release is not None:
                release = release_record(
                    parsed, observation, release["trigger"], generation, str(release["startedAt"])
                )
        drill = None
        if outcomes is None and parsed.drill is not None:
            drill = await _run_drill(parsed, target, body)
        if outcomes is None:
            started = time.monotonic()
            outcomes = await run_checks(
                parsed,
                target,
                namespace,
                health_probe=prober().run_round,
                probe_slot=prober().slot,
                api_client=kube.api_client(),
            )
            for outcome in outcomes:
                took = outcome.duration_s if outcome.duration_s is not None else time.monotonic() - started
                metrics.CHECK_SECONDS.labels(outcome.name).observe(took)
        if drill is not None:
            outcomes = drill.outcomes + outcomes
        outcomes = rollout + outcomes
        new_status, verdict = verdict_status(
            previous, generation, target, str(previous["startedAt"]), outcomes, utc_now(), release
        )
        if drill is not None:
            new_status.update(drill_status(drill, new_status["conditions"], generation, utc_now()))
        gate = parsed.pod_readiness_gate
        if gate is not None:  # at once, rather than at the next gate sync
            ready = condition(new_status["conditions"], "Ready") or {}
            new_status["gatedPods"] = await podgate.sync_pods(gate, namespace, ready, utc_now())
        too_large = await kube.patch_status_or(
            PLURAL,
            namespace,
            name,
            new_status,
            lambda why: too_large_status(new_status, generation, utc_now(), why),
        )
    finally:
        CLAIMS.running.discard(marker.id)
    if too_large is not None:  # written without its rows, once: the spec leaves them no room
        events.warning(body, STATUS_TOO_LARGE, f"the verdict's check rows did not fit: {too_large}")
    metrics.VERDICTS.labels(KIND, verdict.outcome.value).inc()
    metrics.RECONCILIATIONS.labels(KIND, "evaluated").inc()
    metrics.READY.labels(body.metadata.namespace, body.metadata.name).set(1 if verdict.ready else 0)
    changed = previous_ready != ("True" if verdict.ready else "False")
    if not (announce or changed):
        return
    message = f"verdict {verdict.outcome.value}: {verdict.message}"
    if verdict.ready:
        events.normal(body, "Ready", message)
    else:
        events.warning(body, verdict.reason, message)


def _reject(
    body: kopf.Body,
    patch: kopf.Patch,
    conditions: list[dict[str, Any]],
    generation: int,
    problems: list[SpecProblem],
    release: Mapping[str, Any] | None = None,
) -> None:
    status = rejected_status(conditions, generation, problems, utc_now(), release)
    reject(body, patch, KIND, status, problems)
