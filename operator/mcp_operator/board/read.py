"""One MCPReadiness or MCPBenchmark read through the Kubernetes client, from the kubeconfig as
kubectl reads it (``KUBECONFIG``, else ``~/.kube/config``, its current context and namespace),
else a pod's service account. Shared by ``kubectl mcp board`` and ``mcp-operator report``."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .. import kube
from ..api import benchmark, readiness
from ..api.common import GROUP, VERSION


@dataclass(frozen=True)
class Kind:
    name: str  # MCPReadiness
    plural: str
    short: str  # the CRD's short name, as kubectl takes it

    @property
    def aliases(self) -> tuple[str, ...]:
        return (self.short, self.name.lower(), self.plural)


READINESS = Kind(readiness.KIND, readiness.PLURAL, "mcpr")
BENCHMARK = Kind(benchmark.KIND, benchmark.PLURAL, "mcpb")
KINDS = {alias: kind for kind in (READINESS, BENCHMARK) for alias in kind.aliases}


def kind_arg(text: str) -> Kind:
    """``--kind``: the short name, the kind or the plural, in any case."""
    try:
        return KINDS[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r}: mcpr (MCPReadiness) or mcpb (MCPBenchmark)") from None


class ReadError(RuntimeError):
    """The object could not be read. ``missing``: a 404 (the object, its namespace or its kind
    is not there); ``usage``: the cause is what was asked (a 404, or no usable kubeconfig), not
    the API server (unreachable, or refusing: 401, 403, 5xx)."""

    def __init__(self, message: str, missing: bool = False, usage: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
        self.usage = usage or missing


def _kubeconfig() -> str | None:
    """KUBECONFIG as the command was started with (the client reads it only at its import)."""
    return os.environ.get("KUBECONFIG") or None


def api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """A client from ``kubeconfig`` (default: as kubectl finds it) and ``context``, else a pod's
    service account; a kubeconfig or context named and not usable is a ``ReadError`` (usage)."""
    try:
        return config.new_client_from_config(config_file=kubeconfig or _kubeconfig(), context=context)
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        if kubeconfig is not None or context is not None:
            raise ReadError(f"not a usable kubeconfig or context: {exc}", usage=True) from exc
        try:
            config.load_incluster_config()
        except config.ConfigException:
            raise ReadError(f"no usable kubeconfig and not in a pod: {exc}", usage=True) from exc
        return client.ApiClient()


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace the kubeconfig's context names (``context``, else its current one)."""
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig or _kubeconfig())
    except (config.ConfigException, OSError):
        return None
    if context is not None:
        active = next((c for c in contexts if c.get("name") == context), None)
    namespace = ((active or {}).get("context") or {}).get("namespace")
    return None if namespace is None else str(namespace)


def read_object(
    kind: Kind, name: str, namespace: str, kubeconfig: str | None = None, context: str | None = None
) -> dict[str, Any]:
    """The object as ``kubectl get -o json`` shows it."""
    where = f"{kind.short} {namespace}/{name}"
    try:
        obj: dict[str, Any] = client.CustomObjectsApi(
            api_client(kubeconfig, context)
        ).get_namespaced_custom_object(
            GROUP, VERSION, namespace, kind.plural, name, _request_timeout=kube.REQUEST_TIMEOUT_S
        )
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ReadError(f"reading {where}: cannot reach the API server: {exc}") from exc
    except ApiException as exc:
        if exc.status == 404:
            raise ReadError(
                f"{kind.name} {namespace}/{name} not found (kubectl get {kind.short} -n {namespace})",
                missing=True,
            ) from exc
        raise ReadError(f"reading {where}: {exc.status} {kube.api_message(exc)}") from exc
    return obj
