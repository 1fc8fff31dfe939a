"""What the MCPReadiness reconcile reads from the API server: the gate itself as it is now (never
the body an event carried), and the objects ``spec.watch`` names (a Deployment, an Argo CD
Application) through the readers ``readiness.release`` takes."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .. import kube
from ..api.common import GROUP, VERSION
from ..api.readiness import PLURAL
from .release import ReadError, Readers

ARGO_APPLICATIONS = ("argoproj.io", "v1alpha1", "applications")  # group, version, plural
_SERIALIZER: client.ApiClient | None = None


async def fresh(namespace: str, name: str) -> dict[str, Any] | None:
    """The gate as the API server has it now (None once deleted)."""
    try:
        obj: dict[str, Any] = await kube.call(
            kube.custom().get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


async def fresh_generation(namespace: str, name: str, generation: int) -> dict[str, Any] | None:
    """The gate as it is now, if it still has the spec generation a handler was called for;
    None when it was deleted or its spec changed (the newer generation's own event follows)."""
    return of_generation(await fresh(namespace, name), generation)


def of_generation(obj: dict[str, Any] | None, generation: int) -> dict[str, Any] | None:
    """``obj`` if it (still) has the spec ``generation``, else None."""
    if obj is None or int(obj["metadata"]["generation"]) != generation:
        return None
    return obj


async def still_wanted(namespace: str, name: str, generation: int) -> bool:
    """The gate still exists with the spec the round judges."""
    return await fresh_generation(namespace, name, generation) is not None


def _apps() -> client.AppsV1Api:
    return client.AppsV1Api(kube.api_client())


def _plain(model: Any) -> dict[str, Any]:
    """A client model as the JSON the API server sent (camelCase, no None fields)."""
    global _SERIALIZER
    if _SERIALIZER is None:
        _SERIALIZER = client.ApiClient()
    plain: dict[str, Any] = _SERIALIZER.sanitize_for_serialization(model)
    return plain


async def read_deployment(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        deployment = await kube.call(_apps().read_namespaced_deployment, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise ReadError(f"Deployment {namespace}/{name}: {exc.status} {exc.reason}") from exc
    return _plain(deployment)


async def read_application(namespace: str, name: str) -> dict[str, Any] | None:
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


def readers() -> Readers:
    return Readers(read_deployment, read_application)
