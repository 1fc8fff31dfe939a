"""``settled_by_pods``: a run is finished when each completion index has a Succeeded pod that
the Job owns (after an API-server outage the Job controller's Complete came 25 s after the
last shard ended), and never from pods that are not the Job's, a failed pod, or a missing index."""

from __future__ import annotations

from kubernetes import client

from mcp_operator.benchmark.contract import ANNOTATION_COMPLETION_INDEX
from mcp_operator.benchmark.reconcile import JobState, settled_by_pods

RUNNING = JobState(finished=False, succeeded=0, failed=0, uid="job-uid", completions=2)


def _pod(index: int, phase: str, owner: str = "job-uid", controller: bool = True) -> client.V1Pod:
    ref = client.V1OwnerReference(
        api_version="batch/v1", kind="Job", name="j", uid=owner, controller=controller
    )
    meta = client.V1ObjectMeta(
        name=f"j-{index}",
        uid=f"pod-{index}-{phase}-{owner}",
        annotations={ANNOTATION_COMPLETION_INDEX: str(index)},
        owner_references=[ref],
    )
    return client.V1Pod(metadata=meta, status=client.V1PodStatus(phase=phase))


def test_every_index_succeeded_settles_the_run() -> None:
    settled = settled_by_pods(RUNNING, [_pod(0, "Succeeded"), _pod(1, "Succeeded")])
    assert settled.finished and settled.succeeded == 2 and settled.uid == "job-uid"


def test_a_missing_running_or_failed_index_does_not() -> None:
    for pods in (
        [_pod(0, "Succeeded")],
        [_pod(0, "Succeeded"), _pod(1, "Running")],
        [_pod(0, "Succeeded"), _pod(1, "Failed")],
        [_pod(0, "Succeeded"), _pod(0, "Succeeded")],
    ):
        assert settled_by_pods(RUNNING, pods) == RUNNING


def test_pods_the_job_does_not_control_do_not_count() -> None:
    assert settled_by_pods(RUNNING, [_pod(0, "Succeeded"), _pod(1, "Succeeded", owner="other")]) == RUNNING
    assert settled_by_pods(RUNNING, [_pod(0, "Succeeded"), _pod(1, "Succeeded", controller=False)]) == RUNNING


def test_a_finished_job_is_left_as_the_controller_says() -> None:
    done = JobState(finished=True, succeeded=1, failed=1, uid="job-uid", completions=2)
    assert settled_by_pods(done, [_pod(0, "Succeeded"), _pod(1, "Succeeded")]) is done
