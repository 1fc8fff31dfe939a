"""Kubernetes API access shared by the handlers and the shard entrypoint.

The official client is synchronous; handlers call it through ``asyncio.to_thread`` so the
event loop never blocks. One ApiClient per process, configured from KUBECONFIG or, inside a
pod, from the service account.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from . import metrics
from .api.common import GROUP, VERSION

T = TypeVar("T")
log = logging.getLogger(__name__)
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


class ThinCore:
    """The core API calls a readiness gate's round and a resume make (a Service looked up, our
    events listed and posted), with ``CoreV1Api``'s names and arguments, through the client's
    generic ``call_api``. The generated ``CoreV1Api`` imports some 240 modules of models when it
    is first used: 20 MiB of the operator's resident memory for calls that need none of them."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        _preload_content: bool = True,
        _request_timeout: Any = None,
    ) -> Any:
        """The answer as JSON, or the read response (its ``data``) where ``_preload_content`` is
        False; an answer that is not 2xx raises :class:`ApiException`, as the generated API does."""
        request = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request, _request_timeout=_request_timeout)
        response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
        return json.loads(response.data) if _preload_content else response

    @staticmethod
    def _list_query(options: dict[str, Any]) -> list[tuple[str, Any]]:
        names = {"field_selector": "fieldSelector", "limit": "limit", "_continue": "continue"}
        return [(names[k], options.pop(k)) for k in list(options) if k in names]

    def read_namespaced_service(self, name: str, namespace: str, **options: Any) -> Any:
        return self._call("GET", f"/api/v1/namespaces/{namespace}/services/{name}", **options)

    def list_event_for_all_namespaces(self, **options: Any) -> Any:
        return self._call("GET", "/api/v1/events", self._list_query(options), **options)

    def list_namespaced_event(self, namespace: str, **options: Any) -> Any:
        return self._call(
            "GET", f"/api/v1/namespaces/{namespace}/events", self._list_query(options), **options
        )

    def create_namespaced_event(self, namespace: str, body: Any, **options: Any) -> Any:
        return self._call("POST", f"/api/v1/namespaces/{namespace}/events", body=body, **options)


def thin_core() -> ThinCore:
    return ThinCore(api_client())


def batch() -> client.BatchV1Api:
    return client.BatchV1Api(api_client())


def rbac() -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api_client())


def custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client())


def authz() -> client.AuthorizationV1Api:
    return client.AuthorizationV1Api(api_client())


TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
RETRY_DELAYS_S = (0.2, 0.5, 1.0)  # bounded and short: a verdict waits seconds, not kopf's 60 s backoff
MAX_RETRY_AFTER_S = 2.0
MAX_SHARD_RETRY_DELAY_S = 5.0


def too_large(exc: BaseException) -> bool:
    """The API server (413) or etcd (a 500 saying so) refused a write for its size: the same
    write can never succeed, so it is not retried."""
    if not isinstance(exc, ApiException):
        return False
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    return exc.status == 413 or "request is too large" in body


def retry_delay(exc: BaseException, attempt: int) -> float | None:
    """How long to wait before trying ``exc``'s call again, or None when it is not transient or
    the retries are used up (then the handler's own error path takes over)."""
    if attempt >= len(RETRY_DELAYS_S):
        return None
    if isinstance(exc, ApiException):
        if exc.status not in TRANSIENT_STATUS or too_large(exc):
            return None
        after = (exc.headers or {}).get("Retry-After") if exc.headers else None
        try:
            return min(MAX_RETRY_AFTER_S, float(after)) if after else RETRY_DELAYS_S[attempt]
        except ValueError:
            return RETRY_DELAYS_S[attempt]
    if isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError):
        return RETRY_DELAYS_S[attempt]
    return None


def transient(exc: BaseException) -> bool:
    """Throttling, a server error or a broken connection: worth trying again later (kopf's
    retry), where any other failure of a round or a start is written as its verdict."""
    return retry_delay(exc, 0) is not None


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


STARTUP_AUTH_S = 60.0  # a restarted API server refuses service accounts until RBAC has synced


def starting_refusal(exc: BaseException) -> bool:
    """A 401 or 403: final from a running API server, but also what one that has just restarted
    answers a service account until its authenticator and RBAC caches have synced."""
    return isinstance(exc, ApiException) and exc.status in (401, 403)


def call_within(
    fn: Callable[..., T], *args: Any, within_s: float, auth_retry_s: float | None = None, **kwargs: Any
) -> T:
    """``fn`` retried with a growing backoff (0.2 s doubling to 5 s) on any transient failure until
    ``within_s`` has passed: for a shard pod, whose measured result must outlive an API server that
    is restarting (seconds to a minute), where the handlers' few quick retries would give up. A 401
    or 403 is retried for ``auth_retry_s`` (default ``STARTUP_AUTH_S``, read per call: a restarting
    API server's RBAC not synced yet); other errors that are not transient (a 404, a write too
    large) are raised at once."""
    auth_window_s = STARTUP_AUTH_S if auth_retry_s is None else auth_retry_s
    kwargs.setdefault("_request_timeout", min(REQUEST_TIMEOUT_S, max(1.0, within_s)))
    started = time.monotonic()
    deadline = started + within_s
    delay = RETRY_DELAYS_S[0]
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            retried = retry_delay(exc, 0) is not None or (
                starting_refusal(exc) and time.monotonic() - started < auth_window_s
            )
            if not retried or time.monotonic() + delay > deadline:
                raise
            log.warning(
                "API call %s failed (%s); retrying in %.1fs",
                getattr(fn, "__name__", "?"),
                type(exc).__name__,
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, MAX_SHARD_RETRY_DELAY_S)


async def create_or_exists(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
    """Create an object with a deterministic name; a 409 means a retry already made it."""
    try:
        await call(fn, *args, **kwargs)
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


SERVICE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")  # a DNS-1035 label
NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a DNS-1123 label


async def exists(
    read: Callable[..., Any], name: str, namespace: str, absent: tuple[int, ...] = (404,)
) -> bool:
    """Whether ``read`` (a namespaced GET) finds the object: an answer in ``absent`` says none."""
    try:
        await call(read, name, namespace)
    except ApiException as exc:
        if exc.status in absent:
            return False
        raise
    return True


async def service_exists(namespace: str, name: str) -> bool:
    """Whether the Service exists; a name or namespace no Service can have names none, and is
    not asked for: a GET of ``.`` or ``..`` reads the collection or the namespace (200), one of
    ``%…`` is refused (400)."""
    if not (SERVICE_NAME.fullmatch(name) and NAMESPACE_NAME.fullmatch(namespace)):
        return False
    return await exists(thin_core().read_namespaced_service, name, namespace, absent=(400, 404))


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


async def patch_status_or(
    plural: str,
    namespace: str,
    name: str,
    status: dict[str, Any],
    smaller: Callable[[str], dict[str, Any]],
) -> str | None:
    """Write ``status``; when it is refused as too large (the spec leaves the object no room),
    write ``smaller(why)`` instead, once, rather than fail and have the whole round retried.
    Returns why the full status was refused, or None when it was written. When not even the
    smaller one fits, that is logged and left: no write can succeed until the spec shrinks."""
    try:
        await patch_status(plural, namespace, name, status)
    except ApiException as exc:
        if not too_large(exc):
            raise
        why = f"{exc.status} {api_message(exc)}"
    else:
        return None
    try:
        await patch_status(plural, namespace, name, smaller(why))
    except ApiException as exc:
        if not too_large(exc):
            raise
        log.error("%s/%s: not even the smallest status fits in the object: %s", namespace, name, why)
    return why


def api_message(exc: ApiException) -> str:
    """The API server's own message (its Status object), or the HTTP reason."""
    try:
        message = str(json.loads(exc.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    return message or str(exc.reason)
