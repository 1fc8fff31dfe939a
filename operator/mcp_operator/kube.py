"""Kubernetes API access shared by the handlers and the shard entrypoint.

The official client is synchronous; handlers call it through ``asyncio.to_thread`` so the
event loop never blocks. One ApiClient per process, configured from KUBECONFIG or, inside a
pod, from the service account.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .api.common import GROUP, VERSION

T = TypeVar("T")
REQUEST_TIMEOUT_S = 30


@functools.lru_cache(maxsize=1)
def api_client() -> client.ApiClient:
    try:
        config.load_kube_config()
    except config.ConfigException:
        config.load_incluster_config()
    return client.ApiClient()


def core() -> client.CoreV1Api:
    return client.CoreV1Api(api_client())


def batch() -> client.BatchV1Api:
    return client.BatchV1Api(api_client())


def rbac() -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api_client())


def custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client())


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT_S)
    return await asyncio.to_thread(fn, *args, **kwargs)


async def create_or_exists(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
    """Create an object with a deterministic name; a 409 means a retry already made it."""
    try:
        await call(fn, *args, **kwargs)
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


async def service_exists(namespace: str, name: str) -> bool:
    try:
        await call(core().read_namespaced_service, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def patch_status(plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Write status outside kopf's own patch, for progress shown while a handler still runs."""
    await call(
        custom().patch_namespaced_custom_object_status,
        GROUP,
        VERSION,
        namespace,
        plural,
        name,
        {"status": status},
    )
