"""Reads what the check compares from the Kubernetes API (blocking client; the caller runs it
in a thread). A missing object becomes a CamelCase reason naming it, never an empty answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .argocd import GROUP, PLURAL, VERSION
from .hashing import ConfigContent
from .spec import ConfigConsistencySpec, WorkloadKind


class Missing(Exception):
    """An object the check needs is not there (or not readable): reason and message say which."""

    def __init__(self, reason: str, message: str, forbidden: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.forbidden = forbidden


@dataclass
class Observed:
    contents: list[ConfigContent]
    workload: dict[str, Any]
    replica_sets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    application: dict[str, Any] | None = None


def label_selector(selector: Mapping[str, Any]) -> str:
    """A LabelSelector (matchLabels, matchExpressions) as the string the list calls take."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise ValueError(f"unknown selector operator {op!r}")
    if not parts:
        raise ValueError("an empty selector would match every pod")
    return ",".join(parts)


def _read(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except ApiException as exc:
        kind = what.split(" ", 1)[0]
        if exc.status == 404:
            raise Missing(f"{kind}NotFound", f"{what} does not exist") from None
        if exc.status in (401, 403):
            raise Missing(f"{kind}Forbidden", f"reading {what} was refused ({exc.status})", True) from None
        raise


def read_all(spec: ConfigConsistencySpec, api: client.ApiClient) -> Observed:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns, timeout = spec.namespace, spec.timeout_s
    contents = []
    for name in spec.config_maps:
        cm = _read(
            f"ConfigMap {ns}/{name}", core.read_namespaced_config_map, name, ns, _request_timeout=timeout
        )
        contents.append(ConfigContent("ConfigMap", name, dict(cm.data or {}), dict(cm.binary_data or {})))
    for name in spec.secrets:
        secret = _read(f"Secret {ns}/{name}", core.read_namespaced_secret, name, ns, _request_timeout=timeout)
        contents.append(ConfigContent("Secret", name, dict(secret.data or {}), {}))
        del secret  # the value lives on only inside ``contents``, which is hashed and dropped
    if spec.workload_kind == WorkloadKind.DEPLOYMENT:
        raw = _read(
            f"Deployment {ns}/{spec.workload}",
            apps.read_namespaced_deployment,
            spec.workload,
            ns,
            _request_timeout=timeout,
        )
    else:
        raw = _read(
            f"StatefulSet {ns}/{spec.workload}",
            apps.read_namespaced_stateful_set,
            spec.workload,
            ns,
            _request_timeout=timeout,
        )
    workload: dict[str, Any] = api.sanitize_for_serialization(raw)
    workload.setdefault("kind", spec.workload_kind.value)
    selector = label_selector(workload.get("spec", {}).get("selector") or {})
    observed = Observed(contents, workload)
    pods = core.list_namespaced_pod(ns, label_selector=selector, _request_timeout=timeout)
    observed.pods = api.sanitize_for_serialization(pods.items)
    if spec.workload_kind == WorkloadKind.DEPLOYMENT:
        sets = apps.list_namespaced_replica_set(ns, label_selector=selector, _request_timeout=timeout)
        observed.replica_sets = api.sanitize_for_serialization(sets.items)
    if spec.application is not None:
        ref = spec.application
        custom = client.CustomObjectsApi(api)
        observed.application = _read(
            f"Application {ref.namespace}/{ref.name}",
            custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            ref.namespace,
            PLURAL,
            ref.name,
            _request_timeout=timeout,
        )
    return observed
