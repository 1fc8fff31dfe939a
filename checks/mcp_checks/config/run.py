"""The config consistency check: hash the named config, compare it with the workload's rollout
and, when named, with what Argo CD reports for the Application."""

from __future__ import annotations

import asyncio
import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ..verdict import CheckOutcome, Verdict
from .argocd import assess_application
from .assessment import Assessment, combine
from .hashing import config_hash, short
from .read import Missing, Observed, read_all
from .rollout import assess_rollout, deployment_revisions, statefulset_revisions
from .spec import ConfigConsistencySpec, WorkloadKind

CHECK_NAME = "config-consistency"


def _source(spec: ConfigConsistencySpec, host: str) -> str:
    parts = [f"{host} {spec.workload_kind.value} {spec.namespace}/{spec.workload}"]
    if spec.application is not None:
        parts.append(f"Application {spec.application.namespace}/{spec.application.name}")
    return ", ".join(parts)


def _thresholds(spec: ConfigConsistencySpec) -> dict[str, str]:
    out = {"annotation": spec.annotation, "oldRevisionPodsReady": "0"}
    if spec.application is not None:
        out["application"] = "Synced, Healthy, Succeeded"
        if spec.application.gate_wave is not None:
            out["gateWave"] = str(spec.application.gate_wave)
    return out


def evaluate(spec: ConfigConsistencySpec, observed: Observed, source: str) -> CheckOutcome:
    """Pure: everything read from the API in, one check row out."""
    digest = config_hash(observed.contents)
    workload = observed.workload
    if spec.workload_kind == WorkloadKind.DEPLOYMENT:
        revisions = deployment_revisions(workload, observed.replica_sets, observed.pods)
    else:
        revisions = statefulset_revisions(workload, observed.pods)
    parts = [assess_rollout(workload, revisions, digest, spec.annotation, source)]
    if spec.application is not None and observed.application is not None:
        parts.append(assess_application(observed.application, spec.application, source))
    outcome = combine(CHECK_NAME, parts, source, _thresholds(spec))
    outcome.observed["configHash"] = short(digest)
    return outcome


def _failed(
    spec: ConfigConsistencySpec, source: str, verdict: Verdict, reason: str, msg: str
) -> CheckOutcome:
    return combine(CHECK_NAME, [Assessment(verdict, reason, msg)], source, _thresholds(spec))


# a sync wave at or before the gate's own that is still running: Argo CD writes an Application's
# operation state and its sync status from two workers, so the sync result that shows the gate's
# wave reached can trail the rest by a moment; worth reading again within the check's time
STILL_SYNCING = frozenset({"SyncWaveRunning"})
REREAD_INTERVAL_S = 0.5


async def run_config_consistency(spec: ConfigConsistencySpec, api_client: client.ApiClient) -> CheckOutcome:
    """Read and evaluate; while the Application's sync is still running up to the gate's wave,
    read again, up to the spec's timeout, and give the last answer."""
    deadline = time.monotonic() + spec.timeout_s
    while True:
        outcome = await _read_and_evaluate(spec, api_client)
        if outcome.reason not in STILL_SYNCING or time.monotonic() + REREAD_INTERVAL_S >= deadline:
            return outcome
        await asyncio.sleep(REREAD_INTERVAL_S)


async def _read_and_evaluate(spec: ConfigConsistencySpec, api_client: client.ApiClient) -> CheckOutcome:
    """Read in a thread (the client blocks), bounded by the spec's timeout, then evaluate."""
    source = _source(spec, api_client.configuration.host)
    try:
        observed = await asyncio.wait_for(asyncio.to_thread(read_all, spec, api_client), spec.timeout_s)
    except Missing as exc:
        verdict = Verdict.ERROR if exc.forbidden else Verdict.INCONCLUSIVE
        return _failed(spec, source, verdict, exc.reason, str(exc))
    except TimeoutError:
        return _failed(
            spec,
            source,
            Verdict.INCONCLUSIVE,
            "KubernetesApiTimeout",
            f"the Kubernetes API did not answer within {spec.timeout_s}s",
        )
    except ApiException as exc:
        return _failed(
            spec,
            source,
            Verdict.ERROR,
            "KubernetesApiError",
            f"the Kubernetes API answered {exc.status} {exc.reason}",
        )
    except (HTTPError, OSError) as exc:
        return _failed(
            spec,
            source,
            Verdict.INCONCLUSIVE,
            "KubernetesApiUnreachable",
            f"the Kubernetes API is unreachable: {type(exc).__name__}",
        )
    except ValueError as exc:
        return _failed(spec, source, Verdict.ERROR, "InvalidSelector", str(exc))
    return evaluate(spec, observed, source)
