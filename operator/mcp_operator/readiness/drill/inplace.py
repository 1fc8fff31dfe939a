"""An in-place hot update's time (``configHotUpdate`` with ``rollout: false``): from the
ConfigMap's patch until every ready pod of the workload answers, at the fault's ``reportPath``
through the target, with the new content's hash. No pod restarts; what is measured is the
kubelet refreshing the mounted copy and the server reloading it."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from mcp_checks.api import wait_served

from ... import kube
from ...api.drill import FaultSpec
from ...targets import join_url
from ...targets.guarded import check_hooks
from ..faults.base import apis as fault_apis
from ..faults.hotupdate import content_hash
from ..faults.selection import label_selector

TIMEOUT_S = 60.0


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return ready and pod.metadata.deletion_timestamp is None


async def ready_pod_names(namespace: str, workload: str, api: client.ApiClient) -> set[str]:
    apis = fault_apis(api)
    deployment = await kube.call(apis.apps.read_namespaced_deployment, workload, namespace)
    selector = label_selector(deployment.spec.selector.match_labels or {})
    listed = await kube.call(apis.core.list_namespaced_pod, namespace, label_selector=selector)
    return {p.metadata.name for p in listed.items if _ready(p)}


async def reloaded_in_place(
    fault: FaultSpec, namespace: str, base_url: str, api: client.ApiClient
) -> float | None:
    """Seconds until every ready pod serves the ConfigMap's new content (None: not within
    ``TIMEOUT_S``, or no ready pod to ask)."""
    assert fault.config_map is not None and fault.workload is not None
    apis = fault_apis(api)
    config_map = await kube.call(apis.core.read_namespaced_config_map, fault.config_map, namespace)
    servers = await ready_pod_names(namespace, fault.workload, api)
    if not servers:
        return None
    url = join_url(base_url, fault.report_path)
    took, _ = await wait_served(url, content_hash(config_map), servers, TIMEOUT_S, dial=check_hooks())
    return took
