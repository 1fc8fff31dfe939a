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

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from . import metrics
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


TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
RETRY_DELAYS_S = (0.2, 0.5, 1.0)  # bounded and short: a verdict waits seconds, not kopf's 60 s backoff
MAX_RETRY_AFTER_S = 2.0


def retry_delay(exc: BaseException, attempt: int) -> float | None:
    """How long to wait before trying ``exc``'s call again, or None when it is not transient or
    the retries are used up (then the handler's own error path takes over)."""
    if attempt >= len(RETRY_DELAYS_S):
        return None
    if isinstance(exc, ApiException):
        if exc.status not in TRANSIENT_STATUS:
            return None
        after = (exc.headers or {}).get("Retry-After") if exc.headers else None
        try:
            return min(MAX_RETRY_AFTER_S, float(after)) if after else RETRY_DELAYS_S[attempt]
        except ValueError:
            return RETRY_DELAYS_S[attempt]
    if isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError):
        return RETRY_DELAYS_S[attempt]
    return None


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn`` in a thread (the client blocks), retried a few times, briefly, on throttling, a
    server error or a broken connection."""
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT_S)
    attempt = 0
    while True:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except Exception as exc:
            delay = retry_delay(exc, attempt)
            if delay is None:
                raise
            metrics.API_RETRIES.labels(
                type(exc).__name__ if not isinstance(exc, ApiException) else str(exc.status)
            ).inc()
            attempt += 1
            await asyncio.sleep(delay)


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
