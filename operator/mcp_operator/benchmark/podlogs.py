"""Read the shard pods' log tails, where each shard attests the result it wrote (``attestation``).

The API server proxies ``pods/log`` to the kubelet of the pod's node, so what comes back is what
the container wrote, not what someone with API rights stored. A log that cannot be read (the
operator may not ``get pods/log``, the pod is gone, the kubelet does not answer) is kept as the
reason: the collector then accepts nothing from that pod, never Pass on missing data.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import kube
from ..redact import redact_text
from .attestation import ATTESTATION_TAIL_LINES, PodLog
from .contract import SHARD_CONTAINER

READ_AT_ONCE = 8  # log reads in flight together: each goes through the API server to a kubelet
REASON_LIMIT = 200


def unreadable_reason(exc: ApiException) -> str:
    """Why a log read failed, in words an operator can act on."""
    message = redact_text(kube.api_message(exc))[:REASON_LIMIT]
    if exc.status == 403:
        return f"403 Forbidden: the operator may not get pods/log here: {message}"
    if exc.status == 404:
        return f"404: the pod or its container's log is gone: {message}"
    return f"{exc.status}: the kubelet's answer did not come through: {message}"


async def read_pod_log(namespace: str, pod: str) -> PodLog:
    """The last ``ATTESTATION_TAIL_LINES`` lines of the shard container's log, or why not."""
    try:
        text = await kube.call(
            kube.core().read_namespaced_pod_log,
            pod,
            namespace,
            container=SHARD_CONTAINER,
            tail_lines=ATTESTATION_TAIL_LINES,
        )
    except ApiException as exc:
        return PodLog(None, unreadable_reason(exc))
    return PodLog(str(text or ""))


async def read_pod_logs(namespace: str, pods: list[Any], uids: set[str]) -> dict[str, PodLog]:
    """Pod UID -> its log, for the listed pods whose UID is in ``uids`` (the Job's own)."""
    gate = asyncio.Semaphore(READ_AT_ONCE)

    async def one(pod: Any) -> tuple[str, PodLog]:
        async with gate:
            return pod.metadata.uid, await read_pod_log(namespace, pod.metadata.name)

    wanted = [p for p in pods if p.metadata.uid in uids]
    return dict(await asyncio.gather(*(one(p) for p in wanted)))
