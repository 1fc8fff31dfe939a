"""Where the expected recording rules come from, independently of the Prometheus being checked:
prometheus-operator PrometheusRule objects, a rules file held in a ConfigMap key, or a local
file (the CLI). Reading the rules back from Prometheus's ``/api/v1/rules`` would compare a rule
with itself, so a drift check needs one of these (or the rule's own ``expr``); a file that is
Prometheus's own loaded rules file is no reference either (``independence``).

``load`` blocks (Kubernetes API calls, a file read); the check runs it in its thread."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .rulefile import (
    ExpectedRule,
    ReferenceMalformed,
    ReferenceNotIndependent,
    parse_groups,
    parse_rules_text,
)

PROMETHEUS_RULE = ("monitoring.coreos.com", "v1", "prometheusrules")

__all__ = [
    "PROMETHEUS_RULE",
    "ConfigMapRules",
    "PrometheusRuleObjects",
    "ReferenceMalformed",
    "ReferenceNotFound",
    "ReferenceNotIndependent",
    "ReferenceUnreadable",
    "RuleReference",
    "RulesFile",
]


class ReferenceNotFound(LookupError):
    """The reference names objects (or a file, or a key) that are not there."""


class ReferenceUnreadable(RuntimeError):
    """The reference could not be read: forbidden, or the API server did not answer."""


class RuleReference(Protocol):
    def describe(self) -> str: ...

    def load(self, timeout_s: float) -> list[ExpectedRule]: ...


@dataclass(frozen=True)
class RulesFile:
    """A rules file (or PrometheusRule manifests) on the local disk: ``mcp-check drift
    --reference-file``."""

    path: Path

    def describe(self) -> str:
        return f"file {self.path}"

    def load(self, timeout_s: float) -> list[ExpectedRule]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ReferenceNotFound(f"{self.describe()} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ReferenceUnreadable(f"{self.describe()}: {type(exc).__name__}") from None
        return parse_rules_text(text, str(self.path))


def _api_error(what: str, exc: Exception) -> Exception:
    if isinstance(exc, ApiException):
        if exc.status == 404:
            return ReferenceNotFound(f"{what} not found")
        if exc.status in (401, 403):
            return ReferenceUnreadable(f"{what}: access denied ({exc.status}); reading it needs get/list")
        return ReferenceUnreadable(f"{what}: the API server answered {exc.status}")
    return ReferenceUnreadable(f"{what}: the API server did not answer ({type(exc).__name__})")


API_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError)


@dataclass(frozen=True)
class ConfigMapRules:
    """A rules file held in one key of a ConfigMap (how Prometheus without the operator is
    usually given its rules in a cluster)."""

    api: client.ApiClient = field(compare=False, repr=False)
    namespace: str
    name: str
    key: str

    def describe(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}[{self.key}]"

    def load(self, timeout_s: float) -> list[ExpectedRule]:
        core = client.CoreV1Api(self.api)
        try:
            cm = core.read_namespaced_config_map(self.name, self.namespace, _request_timeout=timeout_s)
        except API_ERRORS as exc:
            raise _api_error(f"ConfigMap {self.namespace}/{self.name}", exc) from None
        data = cm.data or {}
        if self.key not in data:
            raise ReferenceNotFound(f"{self.describe()}: the ConfigMap has no key {self.key!r}")
        return parse_rules_text(data[self.key], self.describe())


@dataclass(frozen=True)
class PrometheusRuleObjects:
    """prometheus-operator PrometheusRule objects: one by name, or those a label selector picks
    (every one of the namespace without either). Their ``spec`` is the rules-file structure."""

    api: client.ApiClient = field(compare=False, repr=False)
    namespace: str
    name: str | None = None
    selector: Mapping[str, str] = field(default_factory=dict, hash=False)

    def _selector(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))

    def describe(self) -> str:
        if self.name:
            return f"PrometheusRule {self.namespace}/{self.name}"
        picked = f" selected by {self._selector()}" if self.selector else ""
        return f"PrometheusRules of {self.namespace}{picked}"

    def _objects(self, timeout_s: float) -> list[Mapping[str, Any]]:
        group, version, plural = PROMETHEUS_RULE
        api = client.CustomObjectsApi(self.api)
        if self.name:
            obj = api.get_namespaced_custom_object(
                group, version, self.namespace, plural, self.name, _request_timeout=timeout_s
            )
            return [obj]
        selector = self._selector()
        listed = api.list_namespaced_custom_object(
            group, version, self.namespace, plural, label_selector=selector, _request_timeout=timeout_s
        )
        items: list[Mapping[str, Any]] = listed.get("items") or []
        return items

    def load(self, timeout_s: float) -> list[ExpectedRule]:
        try:
            objects = self._objects(timeout_s)
        except API_ERRORS as exc:
            if isinstance(exc, ApiException) and exc.status == 404 and not self.name:
                # listing a kind the API server does not serve: prometheus-operator's CRD is absent
                raise ReferenceNotFound(
                    f"{self.describe()}: the API server serves no PrometheusRule kind "
                    "(is prometheus-operator's CRD installed?)"
                ) from None
            raise _api_error(self.describe(), exc) from None
        if not objects:
            raise ReferenceNotFound(f"no {self.describe()}")
        out: list[ExpectedRule] = []
        for obj in sorted(objects, key=lambda o: str((o.get("metadata") or {}).get("name", ""))):
            name = (obj.get("metadata") or {}).get("name", "?")
            out.extend(parse_groups(obj.get("spec"), f"PrometheusRule {self.namespace}/{name}"))
        return out
