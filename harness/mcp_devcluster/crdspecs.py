"""The two custom resources as the generated-spec tests see them: each CRD's spec schema read
from ``crds/`` (the generated YAML the API server judges, not the models it came from), a
server-side dry run that asks the API server what it would store, the objects stored in a
namespace, and the hypothesis settings those tests share (a fixed draw by default, a fresh and
longer one under ``--long``)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

GROUP, VERSION = "mcp2026.io", "v1alpha1"
PLURALS = {"MCPReadiness": "mcpreadinesses", "MCPBenchmark": "mcpbenchmarks"}
CRD_DIR = Path(__file__).resolve().parents[2] / "crds"


@cache
def spec_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``kind``'s ``spec``, CEL rules (x-kubernetes-validations) included."""
    crd = yaml.safe_load((CRD_DIR / f"{GROUP}_{PLURALS[kind]}.yaml").read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def body(kind: str, name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}


def dry_run(api: client.ApiClient, namespace: str, kind: str, name: str, spec: Any) -> tuple[int, str]:
    """(HTTP status, message) of a server-side dry-run create with strict field validation;
    (201, "") when the API server would store it."""
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURALS[kind],
            body(kind, name, spec),
            dry_run="All",
            field_validation="Strict",
        )
    except ApiException as exc:
        try:
            message = str(json.loads(exc.body or "{}").get("message") or exc.body)
        except ValueError:
            message = str(exc.body)
        return int(exc.status or 0), message
    return 201, ""


def stored(api: client.ApiClient, namespace: str) -> list[str]:
    """``Kind/name`` of every object of both resources in ``namespace``."""
    custom = client.CustomObjectsApi(api)
    return [
        f"{kind}/{item['metadata']['name']}"
        for kind, plural in PLURALS.items()
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
    ]


def examples(is_long: bool, default: int, long: int) -> settings:
    """``default`` examples, the same every run, or ``long`` fresh ones; nothing written into the
    repository, and no health check that a slow real API server would trip."""
    return settings(
        max_examples=long if is_long else default,
        deadline=None,
        database=None,
        derandomize=not is_long,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
            HealthCheck.function_scoped_fixture,
        ],
    )
