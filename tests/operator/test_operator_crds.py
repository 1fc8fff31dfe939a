"""The committed CRDs: equal to what the models generate now, structural, and complete."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator import crdgen

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"
FORBIDDEN_KEYS = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "const", "prefixItems"}


def _manifest(kind: str) -> dict[str, Any]:
    definition = next(d for d in crdgen.DEFINITIONS if d.kind == kind)
    loaded: dict[str, Any] = yaml.safe_load((CRD_DIR / crdgen.file_name(definition)).read_text())
    return loaded


def _version(kind: str) -> dict[str, Any]:
    (version,) = _manifest(kind)["spec"]["versions"]
    assert isinstance(version, dict)
    return version


def _root_schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = _version(kind)["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its dotted path (properties by name, array items as [])."""
    if not isinstance(node, dict):
        return
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


GENERATED = crdgen.generated_files(REPO)


@pytest.mark.parametrize("path", sorted(GENERATED), ids=lambda p: str(p.relative_to(REPO)))
def test_committed_files_match_the_code(path: Path) -> None:
    """CRDs (top level and Helm chart) and the operator's RBAC rules, as generated now."""
    rel = path.relative_to(REPO)
    assert path.is_file(), f"{rel} is missing; run `mcp-operator crds` and commit the result"
    assert path.read_text() == GENERATED[path], (
        f"{rel} differs from what the code generates; run `mcp-operator crds` and commit the result"
    )


def test_every_crd_file_is_generated() -> None:
    """A CRD file no model produces any more (a renamed kind) must not linger in an install path."""
    found = {p for top in ("crds", "charts", "manifests") for p in (REPO / top).glob("**/mcp2026.io_*.yaml")}
    assert found <= set(GENERATED), sorted(str(p.relative_to(REPO)) for p in found - set(GENERATED))
    assert {CRD_DIR / crdgen.file_name(d) for d in crdgen.DEFINITIONS} <= set(GENERATED)


@pytest.mark.parametrize("kind", ["MCPReadiness", "MCPBenchmark"])
def test_schema_is_structural(kind: str) -> None:
    root = _root_schema(kind)
    problems = []
    for path, node in _walk(root, "<root>"):
        for key in FORBIDDEN_KEYS & node.keys():
            problems.append(f"{path}: has {key}")
        if node.get("additionalProperties") is False:
            problems.append(f"{path}: additionalProperties: false")
        if "default" in node and node["default"] is None:
            problems.append(f"{path}: default null")
        if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            problems.append(f"{path}: no type")
        for bound, partner in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if bound in node and (node[bound] is not True or partner not in node):
                problems.append(f"{path}: {bound} must be the boolean form next to {partner}")
        for name in node.get("required", []):
            if name not in node.get("properties", {}):
                problems.append(f"{path}: requires undeclared {name}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("kind", ["MCPReadiness", "MCPBenchmark"])
@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_object_declares_its_fields(kind: str, part: str) -> None:
    """An object without properties or additionalProperties is pruned to {} by the API server."""
    schema = _root_schema(kind)["properties"][part]
    bare = [
        path
        for path, node in _walk(schema, part)
        if node.get("type") == "object"
        and "properties" not in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ]
    assert not bare, f"objects that would be pruned to nothing: {bare}"
    undocumented = [
        f"{path}.{name}"
        for path, node in _walk(schema, part)
        for name, prop in node.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert not undocumented, f"{kind} fields without description (kubectl explain): {undocumented}"


def _validations(node: dict[str, Any]) -> list[str]:
    return [v["rule"] for v in node.get("x-kubernetes-validations", [])]


def test_cel_rules_are_carried_over() -> None:
    bench = _root_schema("MCPBenchmark")["properties"]["spec"]["properties"]
    assert "has(self.url) != has(self.serviceRef)" in _validations(bench["target"])
    load = _validations(bench["load"])
    assert load[:2] == [
        "has(self.concurrency) != has(self.rate)",
        "has(self.durationSeconds) || has(self.requests)",
    ]
    assert len(load) == 4 and all(rule.startswith("!has(self.search) || ") for rule in load[2:])
    # a memory limit below the request is refused at apply time (the Job would be refused later)
    (limit,) = bench["runner"]["x-kubernetes-validations"]
    assert (
        limit["fieldPath"] == ".memoryLimit"
        and limit["fieldPath"].lstrip(".") in bench["runner"]["properties"]
    )
    assert "!quantity(self.memoryLimit).isLessThan(quantity(self.memory))" in limit["rule"]
    ready = _root_schema("MCPReadiness")["properties"]["spec"]["properties"]
    assert "has(self.url) != has(self.serviceRef)" in _validations(ready["target"])
    probe = ready["checks"]["properties"]["healthProbe"]
    rules = probe["x-kubernetes-validations"]
    assert [r["fieldPath"] for r in rules] == [".maxP50Ms", ".maxP99Ms"]
    # every fieldPath names a declared property of the object the rule sits on
    for rule in rules:
        assert rule["fieldPath"].lstrip(".") in probe["properties"]
        assert rule["message"]


def _cel_regex(rule: str) -> re.Pattern[str]:
    """The regex of a ``self.matches('...')`` rule (RE2 and Python agree on these patterns)."""
    match = re.search(r"matches\('(.*)'\)", rule)
    assert match, rule
    return re.compile(match.group(1))


CREDENTIAL_URLS = [
    "http://user:tok@svc:8000/v1",
    "https://tok@svc/",
    "user:tok@svc:8000",
    "http://svc/x?token=tok",
    "http://svc/x?a=1&API_KEY=tok",
    "http://svc/x?sig=tok",
    "http://svc/x?client_secret=tok",
]
CLEAN_URLS = ["http://svc:8000/v1", "svc:8000", "http://svc/x?ms=2&monkey=1", "http://svc/@home"]


def test_a_url_with_credentials_is_refused_at_apply_time() -> None:
    url = _root_schema("MCPBenchmark")["properties"]["spec"]["properties"]["target"]["properties"]["url"]
    rules = [r for r in url["x-kubernetes-validations"] if "PortOutOfRange" not in r["message"]]
    assert all(r["rule"].startswith("!self.matches(") and "CredentialsInUrl" in r["message"] for r in rules)
    patterns = [_cel_regex(r["rule"]) for r in rules]
    for bad in CREDENTIAL_URLS:
        assert any(p.search(bad) for p in patterns), bad
    for good in CLEAN_URLS:
        assert not any(p.search(good) for p in patterns), good


def test_node_selector_keys_are_checked_as_qualified_names() -> None:
    runner = _root_schema("MCPBenchmark")["properties"]["spec"]["properties"]["runner"]["properties"]
    (rule,) = runner["nodeSelector"]["x-kubernetes-validations"]
    pattern = _cel_regex(rule["rule"])
    for good in ("zone", "nvidia.com/gpu.product", "kubernetes.io/hostname", "a_b.c-d", "x" * 63):
        assert pattern.search(good), good
    for bad in ("", "-x", "x-", "bad key", "a/b/c", "UPPER.com/x", "x" * 64, "/x"):
        assert not pattern.search(bad), bad
    assert "\\" not in rule["rule"]  # no backslash escapes inside the CEL string literal


@pytest.mark.parametrize(
    ("kind", "short", "plural"),
    [("MCPBenchmark", "mcpb", "mcpbenchmarks"), ("MCPReadiness", "mcpr", "mcpreadinesses")],
)
def test_names_subresource_and_scope(kind: str, short: str, plural: str) -> None:
    manifest = _manifest(kind)
    spec = manifest["spec"]
    assert manifest["metadata"]["name"] == f"{plural}.mcp2026.io"
    assert spec["group"] == "mcp2026.io" and spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == [short]
    assert spec["names"]["plural"] == plural and spec["names"]["kind"] == kind
    assert "mcp" in spec["names"]["categories"]
    version = _version(kind)
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        ("MCPReadiness", ["Ready", "Reason", "Verdict", "Score %", "Stage", "Last", "Age"]),
        ("MCPBenchmark", ["Phase", "Verdict", "P99 ms", "Throughput rps", "Shards", "Age"]),
    ],
)
def test_printer_columns_point_at_declared_status_fields(kind: str, columns: list[str]) -> None:
    printed = _version(kind)["additionalPrinterColumns"]
    names = [c["name"] for c in printed]
    assert set(columns) <= set(names)
    status = _root_schema(kind)["properties"]["status"]
    for col in printed:
        path = col["jsonPath"]
        if not path.startswith(".status."):
            assert path == ".metadata.creationTimestamp"
            continue
        # follow .status.a.b (a filter like conditions[?(...)] stops at the list)
        node = status
        for part in path.removeprefix(".status.").split("."):
            name = part.split("[", 1)[0]
            assert name in node.get("properties", {}), f"column {col['name']}: {path} is not declared"
            node = node["properties"][name]
            if "[" in part:
                break
        if col["type"] == "integer" and "[" not in path:
            assert node["type"] == "integer", f"column {col['name']} is integer but {path} is {node['type']}"


def test_render_is_deterministic_and_parses_back() -> None:
    for definition in crdgen.DEFINITIONS:
        text = crdgen.render(definition)
        assert text == crdgen.render(definition)
        assert text.startswith("# Generated by `mcp-operator crds`")
        assert yaml.safe_load(text) == crdgen.crd_manifest(definition)


def test_an_evaluation_in_progress_shows_as_evaluating_not_as_the_previous_verdict() -> None:
    """Reason (Ready's) is in the default columns: Evaluating while a round runs, when Verdict and
    Score are empty (running_status removes them); the previous round's verdict is Last (wide)."""
    printed = {c["name"]: c for c in _version("MCPReadiness")["additionalPrinterColumns"]}
    assert printed["Reason"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert "priority" not in printed["Reason"]
    assert printed["Verdict"]["jsonPath"] == ".status.verdict"
    assert printed["Last"]["jsonPath"] == ".status.history[-1:].verdict" and printed["Last"]["priority"] == 1
