"""The service proxy's view of the API: Services and EndpointSlices, listed then watched.

Each kind is followed on a thread of its own with the synchronous client (a full list, then a
watch from its resourceVersion, a fresh list whenever the watch ends or fails), and handed to
the proxy's event loop as plain records (``serviceroutes``): the loop never blocks on the API,
and a relist drops whatever was deleted while no watch was open.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from .nodes import api_client
from .serviceroutes import ObjectKey, service_record, slice_record

log = logging.getLogger("mcp_devcluster.servicewatch")

WATCH_TIMEOUT_S = 60
SERVICES, SLICES = "services", "endpointslices"

# (kind, key, record or None); a LIST hands over every record at once, keyed
Deliver = Callable[[str, ObjectKey, Any], None]
Replace = Callable[[str, dict[ObjectKey, Any]], None]


def start_watches(kubeconfig: Path, deliver: Deliver, replace: Replace, stopping: threading.Event) -> None:
    """Follow Services and EndpointSlices of every namespace until ``stopping``."""
    kinds: list[tuple[str, Callable[..., Any], Callable[[Any], Any]]] = [
        (SERVICES, client.CoreV1Api(api_client(kubeconfig)).list_service_for_all_namespaces, service_record),
        (
            SLICES,
            client.DiscoveryV1Api(api_client(kubeconfig)).list_endpoint_slice_for_all_namespaces,
            slice_record,
        ),
    ]
    for kind, lister, convert in kinds:
        threading.Thread(
            target=_follow,
            args=(kind, lister, convert, deliver, replace, stopping),
            daemon=True,
            name=f"watch-{kind}",
        ).start()


def _follow(
    kind: str,
    lister: Callable[..., Any],
    convert: Callable[[Any], Any],
    deliver: Deliver,
    replace: Replace,
    stopping: threading.Event,
) -> None:
    while not stopping.is_set():
        try:
            listed = lister()
            records = {_key(obj): convert(obj) for obj in listed.items}
            replace(kind, {k: r for k, r in records.items() if r is not None})
            stream = watch.Watch().stream(
                lister, resource_version=listed.metadata.resource_version, timeout_seconds=WATCH_TIMEOUT_S
            )
            for event in stream:
                obj = event["object"]
                gone = event["type"] == "DELETED"
                deliver(kind, _key(obj), None if gone else convert(obj))
                if stopping.is_set():
                    return
        except Exception:
            log.exception("%s watch failed; listing again", kind)
            time.sleep(0.5)


def _key(obj: Any) -> ObjectKey:
    return (obj.metadata.namespace, obj.metadata.name)
