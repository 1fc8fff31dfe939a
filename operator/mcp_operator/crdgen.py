"""Turn the pydantic API models into CustomResourceDefinitions.

Kubernetes wants a *structural* OpenAPI v3.0 schema: no ``$ref``, no ``anyOf`` for
optionality, ``exclusiveMinimum`` as a boolean. Pydantic emits JSON Schema 2020-12, so this
module rewrites it; everything else (descriptions, defaults, enums, patterns, bounds and
the CEL rules in ``x-kubernetes-validations``) is carried over from the models.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from .api import GROUP, VERSION, benchmark, readiness
from .api.benchmark import MCPBenchmarkSpec, MCPBenchmarkStatus
from .api.readiness import MCPReadinessSpec, MCPReadinessStatus
from .rbac import (
    CLUSTER_RULES,
    FAULT_RULES,
    GPU_SAMPLER_RULES,
    LEASE_RULES,
    NODE_FAULT_RULES,
    WORK_RULES,
    cluster_roles,
    lease_role,
    work_role,
)

DROP_KEYS = {"title"}


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_resolve(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        extra = {k: v for k, v in node.items() if k != "$ref"}
        return _resolve(_merge(target, extra), defs)
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot express anyOf with {len(branches)} non-null branches structurally")
        outer = {k: v for k, v in node.items() if k != "anyOf"}
        if outer.get("default", 0) is None:
            outer.pop("default")
        return _resolve(_merge(copy.deepcopy(branches[0]), outer), defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROP_KEYS or key == "$defs":
            continue
        if key == "properties":
            out[key] = {name: _resolve(schema, defs) for name, schema in value.items()}
        else:
            out[key] = _resolve(value, defs)
    return _openapi_v3(out)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _merge(base[key], value)
        else:
            base[key] = value
    return base


def _openapi_v3(node: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema 2020 numeric exclusivity becomes OpenAPI 3.0's boolean form."""
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(bound)
        if isinstance(value, int | float) and not isinstance(value, bool):
            node[flag] = value
            node[bound] = True
    _fractional_bounds_in_cel(node)
    if node.get("default") is None:
        node.pop("default", None)
    if "const" in node:  # a one-value Literal: OpenAPI 3.0 says it as a one-value enum
        node["enum"] = [node.pop("const")]
    extra = node.get("additionalProperties")
    if extra is False:
        # extra="forbid" models: the API server prunes and, with strict field validation,
        # rejects unknown fields by path; `additionalProperties: false` is not structural.
        node.pop("additionalProperties")
    elif extra is True:
        node.pop("additionalProperties")
        node["x-kubernetes-preserve-unknown-fields"] = True
    return node


def _fractional_bounds_in_cel(node: dict[str, Any]) -> None:
    """A fractional bound of a number is also a CEL rule: the API server's OpenAPI validation
    compares a JSON integer with the bound truncated to an integer, so ``minimum: 0.5`` admits
    ``0``. CEL sees the integer as a double and compares exactly."""
    if node.get("type") != "number":
        return
    rules = []
    for bound, inclusive, exclusive, words in (
        ("minimum", ">=", ">", ("at least", "greater than")),
        ("maximum", "<=", "<", ("at most", "less than")),
    ):
        value = node.get(bound)
        if not isinstance(value, float) or value.is_integer():
            continue
        strict = node.get(f"exclusive{bound.capitalize()}") is True
        rules.append(
            {
                "rule": f"self {exclusive if strict else inclusive} {value!r}",
                "message": f"must be {words[1] if strict else words[0]} {value!r}",
            }
        )
    if rules:
        node["x-kubernetes-validations"] = [*node.get("x-kubernetes-validations", []), *rules]


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    resolved: dict[str, Any] = _resolve(raw, defs)
    return resolved


@dataclass(frozen=True)
class CrdDefinition:
    kind: str
    plural: str
    singular: str
    short_names: list[str]
    spec_model: type[BaseModel]
    status_model: type[BaseModel]
    columns: list[dict[str, Any]]
    description: str

    @property
    def name(self) -> str:
        return f"{self.plural}.{GROUP}"


def _column(
    name: str, path: str, type_: str = "string", priority: int = 0, description: str = ""
) -> dict[str, Any]:
    col: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        col["priority"] = priority
    if description:
        col["description"] = description
    return col


AGE = _column("Age", ".metadata.creationTimestamp", "date")

DEFINITIONS = [
    CrdDefinition(
        kind=readiness.KIND,
        plural=readiness.PLURAL,
        singular="mcpreadiness",
        short_names=["mcpr"],
        spec_model=MCPReadinessSpec,
        status_model=MCPReadinessStatus,
        description="A production readiness gate for an inference service; wait on its Ready condition.",
        columns=[
            _column("Ready", '.status.conditions[?(@.type=="Ready")].status', description="Ready condition"),
            # Evaluating while a round runs; Verdict and Score are then empty (running_status
            # removes the previous round's), never the previous release's figures
            _column(
                "Reason",
                '.status.conditions[?(@.type=="Ready")].reason',
                description="Reason of the Ready condition: Evaluating while an evaluation runs",
            ),
            _column("Verdict", ".status.verdict", description="Worst check verdict; empty while one runs"),
            _column(
                "Score %",
                ".status.score",
                "integer",
                description="Share of checks passed (%); empty while an evaluation runs",
            ),
            _column("Stage", ".status.stage", description="The drill's stage now (i/n)"),
            _column("Phase", ".status.phase", priority=1),
            _column(
                "Last",
                ".status.history[-1:].verdict",
                priority=1,
                description="Verdict of the last finished evaluation (shown while the next one runs)",
            ),
            _column("Target", ".status.targetUrl", priority=1),
            AGE,
        ],
    ),
    CrdDefinition(
        kind=benchmark.KIND,
        plural=benchmark.PLURAL,
        singular="mcpbenchmark",
        short_names=["mcpb"],
        spec_model=MCPBenchmarkSpec,
        status_model=MCPBenchmarkStatus,
        description="A sharded GPU benchmark of an inference endpoint with merged, exact percentiles.",
        columns=[
            _column("Phase", ".status.phase"),
            _column("Verdict", ".status.verdict"),
            _column("P99 ms", ".status.p99Ms", description="P99 latency (ms) of the last level"),
            _column("Throughput rps", ".status.throughputRps", description="Requests/s of the last level"),
            _column("Shards", ".status.shards.reported", "integer", description="Shard results merged"),
            _column("Level", ".status.progress.level", description="Level being run (i/n), live"),
            _column("ETA s", ".status.progress.etaSeconds", "integer", priority=1),
            _column("Job", ".status.jobName", priority=1),
            AGE,
        ],
    ),
]


def crd_manifest(definition: CrdDefinition) -> dict[str, Any]:
    spec_schema = structural_schema(definition.spec_model)
    spec_schema["description"] = spec_schema.get("description") or f"Desired state of {definition.kind}."
    status_schema = structural_schema(definition.status_model)
    status_schema["description"] = f"Observed state of {definition.kind}, written by the operator."
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": definition.name, "labels": {"app.kubernetes.io/part-of": "mcp-operator"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": definition.kind,
                "listKind": f"{definition.kind}List",
                "plural": definition.plural,
                "singular": definition.singular,
                "shortNames": definition.short_names,
                "categories": ["mcp"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": definition.columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": definition.description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema,
                                "status": status_schema,
                            },
                        }
                    },
                }
            ],
        },
    }


HEADER = "# Generated by `mcp-operator crds` from the pydantic models in mcp_operator.api. Do not edit.\n"


RBAC_HEADER = "# Generated by `mcp-operator crds` from mcp_operator.rbac. Do not edit.\n"
WATCHED_EXAMPLE = "default"  # the namespace manifests/overlays/namespaced watches


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=120)


def render(definition: CrdDefinition) -> str:
    return HEADER + _dump(crd_manifest(definition))


def render_for_crd_chart(definition: CrdDefinition) -> str:
    """The CRD as the chart ``mcp-operator-crds`` installs and upgrades it: Helm keeps it on
    uninstall (deleting a CRD deletes every object of its kind)."""
    manifest = crd_manifest(definition)
    manifest["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
    return HEADER + _dump(manifest)


def file_name(definition: CrdDefinition) -> str:
    return f"{GROUP}_{definition.plural}.yaml"


def generated_files(repo: Path) -> dict[Path, str]:
    """Every file generated from code, by path: the CRDs (top level, in the Helm chart's crds/
    and in the CRD chart, which upgrades them), the operator's ClusterRoles (kustomize base), the
    namespaced overlay's Role, each part's rules (Helm chart), and the leader Lease's Role."""
    files: dict[Path, str] = {}
    for definition in DEFINITIONS:
        text = render(definition)
        files[repo / "crds" / file_name(definition)] = text
        files[repo / "charts" / "mcp-operator" / "crds" / file_name(definition)] = text
        files[repo / "charts" / "mcp-operator-crds" / "files" / file_name(definition)] = render_for_crd_chart(
            definition
        )
    base, chart_files = repo / "manifests" / "base", repo / "charts" / "mcp-operator" / "files"
    files[base / "clusterrole.yaml"] = RBAC_HEADER + "---\n".join(_dump(role) for role in cluster_roles())
    files[base / "leader-role.yaml"] = RBAC_HEADER + _dump(lease_role())
    # the namespaced overlay's Role in its example watched namespace (the dev overlay's too)
    namespaced = repo / "manifests" / "overlays" / "namespaced"
    files[namespaced / "role.yaml"] = RBAC_HEADER + _dump(work_role(WATCHED_EXAMPLE))
    for name, rules in (
        ("cluster-rules", CLUSTER_RULES),
        ("work-rules", WORK_RULES),
        ("fault-rules", FAULT_RULES),
        ("node-fault-rules", NODE_FAULT_RULES),
        ("gpu-sampler-rules", GPU_SAMPLER_RULES),
        ("leader-rules", LEASE_RULES),
    ):
        files[chart_files / f"{name}.yaml"] = RBAC_HEADER + _dump(rules)
    return files


def write_all(repo: Path) -> list[Path]:
    written = []
    for path, text in generated_files(repo).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
