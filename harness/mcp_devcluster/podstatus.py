"""Pod status as a kubelet reports it, built as the API's status dicts.

Running with each container's state, then Succeeded or Failed with exit codes and termination
messages, Failed with StartError for a pod this node cannot run, and Ready following the
pod's readiness probes and gates. Pure functions of the pod and its processes, so the wording and fields
can be read (and tested) apart from any process or API call.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from mcp_checks.verdict import utc_now

from .containers import RunningContainer
from .podnet import HOST_NETWORK, PodAddresses
from .termination import termination_message


def ready_condition(pod: client.V1Pod, stamp: str, unready: list[str] | None = None) -> dict[str, str]:
    """Ready for a pod whose containers run: True only when no container is ``unready`` (its
    readiness probe has not passed) and every readiness gate's condition is True (reasons and
    messages follow the kubelet's wording)."""
    if unready:
        return {
            "type": "Ready",
            "status": "False",
            "reason": "ContainersNotReady",
            "message": f"containers with unready status: [{' '.join(unready)}]",
            "lastTransitionTime": stamp,
        }
    present = {c.type: c.status for c in pod.status.conditions or []}
    for gate in pod.spec.readiness_gates or []:
        if present.get(gate.condition_type) != "True":
            missing = gate.condition_type not in present
            what = "does not exist" if missing else "is not True"
            return {
                "type": "Ready",
                "status": "False",
                "reason": "ReadinessGatesNotReady",
                "message": f'corresponding condition of pod readiness gate "{gate.condition_type}" {what}.',
                "lastTransitionTime": stamp,
            }
    return {"type": "Ready", "status": "True", "lastTransitionTime": stamp}


def readiness_status(pod: client.V1Pod, containers: list[RunningContainer], stamp: str) -> dict[str, Any]:
    """Each running container's readiness, ContainersReady and Ready: what a probe result changes."""
    unready = [c.name for c in containers if not c.ready]
    containers_ready: dict[str, str] = {
        "type": "ContainersReady",
        "status": "True",
        "lastTransitionTime": stamp,
    }
    if unready:
        containers_ready.update(
            status="False",
            reason="ContainersNotReady",
            message=f"containers with unready status: [{' '.join(unready)}]",
        )
    statuses = [
        {
            "name": c.name,
            "image": container_image(pod, c.name),
            "imageID": "",
            "ready": c.ready,
            "restartCount": 0,
            "started": True,
            "state": {"running": {"startedAt": c.started_at}},
        }
        for c in containers
    ]
    return {
        "containerStatuses": statuses,
        "conditions": [containers_ready, ready_condition(pod, stamp, unready)],
    }


def running_status(
    pod: client.V1Pod,
    containers: list[RunningContainer],
    stamp: str,
    addresses: PodAddresses = HOST_NETWORK,
) -> dict[str, Any]:
    """Every container started; ready as its probe and the pod's readiness gates allow; the pod
    IP the endpointslice controller publishes (``podnet``)."""
    readiness = readiness_status(pod, containers, stamp)
    conditions = [{"type": "Initialized", "status": "True", "lastTransitionTime": stamp}]
    return {
        "phase": "Running",
        "hostIP": addresses.host_ip,
        "podIP": addresses.pod_ip,
        "podIPs": [{"ip": addresses.pod_ip}],
        "hostIPs": [{"ip": addresses.host_ip}],
        "startTime": stamp,
        "containerStatuses": readiness["containerStatuses"],
        "conditions": conditions + readiness["conditions"],
    }


def completed_status(
    pod: client.V1Pod, containers: list[RunningContainer], exit_codes: list[int]
) -> dict[str, Any]:
    """Succeeded when every container exited 0, else Failed; no longer Ready either way."""
    phase = "Succeeded" if all(code == 0 for code in exit_codes) else "Failed"
    statuses = [
        terminated_container_status(pod, c, code) for c, code in zip(containers, exit_codes, strict=True)
    ]
    stamp = utc_now()
    conditions = [
        {"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp}
        for t in ("Ready", "ContainersReady")
    ]
    return {"phase": phase, "containerStatuses": statuses, "conditions": conditions}


def terminated_container_status(pod: client.V1Pod, c: RunningContainer, code: int) -> dict[str, Any]:
    """A container that exited with ``code`` (negative: killed by that signal, as Popen reports it)."""
    message = termination_message(c.message_path, c.log_path, c.message_policy, code)
    terminated: dict[str, Any] = {
        "exitCode": code if code >= 0 else 128 - code,
        "reason": "Completed" if code == 0 else "Error",
        "startedAt": c.started_at,
        "finishedAt": utc_now(),
    }
    if code < 0:
        terminated["signal"] = -code
    if message:
        terminated["message"] = message
    return {
        "name": c.name,
        "image": container_image(pod, c.name),
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"terminated": terminated},
    }


def unrunnable_status(pod: client.V1Pod, message: str) -> dict[str, Any]:
    """A pod this node could not start: Failed, every container terminated with StartError."""
    statuses = [
        {
            "name": spec.name,
            "image": spec.image or "",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": message,
                    "startedAt": utc_now(),
                    "finishedAt": utc_now(),
                }
            },
        }
        for spec in pod.spec.containers
    ]
    return {"phase": "Failed", "reason": "StartError", "message": message, "containerStatuses": statuses}


def container_image(pod: client.V1Pod, container: str) -> str:
    return next((c.image or "" for c in pod.spec.containers if c.name == container), "")
