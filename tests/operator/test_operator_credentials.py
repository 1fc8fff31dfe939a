"""No credentials in any URL field of either resource: every URL-like field of the models carries
the CEL rules of ``mcp_operator.api.credentials`` (the CRDs are generated from the models), and
they refuse userinfo, a secret-looking query parameter and a percent-encoded parameter name, while
the field's own pattern admits the value (so the refusal is the credentials rule's, by name)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_operator import crdgen
from mcp_operator.api.common import TargetHeader
from mcp_operator.api.credentials import ENCODED_PARAM, FRAGMENT, SECRET_PARAM, USERINFO
from mcp_operator.redact import url_has_credentials

CANARY = "CANARY-5f3e"

# (kind, field path in the spec schema, a clean value, whether it is a URL (else a path and query),
# the name its rule messages start with)
URL_FIELDS = [
    ("MCPReadiness", "target.url", "http://svc:8000/v1", True, "url"),
    ("MCPReadiness", "checks.healthProbe.path", "/health", False, "healthProbe path"),
    ("MCPReadiness", "checks.xdsSync.sources[].address", "http://istiod:15014", True, "xDS source address"),
    ("MCPReadiness", "checks.metricDrift.prometheusUrl", "http://prom:9090", True, "prometheusUrl"),
    ("MCPReadiness", "drill.serverRequests.urls[]", "http://svc:8000/metrics", True, "serverRequests url"),
    ("MCPReadiness", "drill.stages[].load.path", "/v1/infer", False, "load path"),
    ("MCPBenchmark", "target.url", "http://svc:8000/v1", True, "url"),
    ("MCPBenchmark", "target.path", "/v1/infer", False, "path"),
    ("MCPBenchmark", "observe.serverMetrics[]", "vllm=http://vllm:8000/metrics", True, "serverMetrics entry"),
    ("MCPBenchmark", "observe.tritonStats[]", "resnet=http://triton:8002", True, "tritonStats entry"),
    ("MCPBenchmark", "observe.prometheus.url", "http://prom:9090", True, "prometheus url"),
    ("MCPBenchmark", "workload.images.urlBase", "http://images:8080/pool", True, "urlBase"),
    ("MCPBenchmark", "workload.classes[].images.urlBase", "http://images:8080/pool", True, "urlBase"),
]
IDS = [f"{kind}.{path}" for kind, path, *_ in URL_FIELDS]


def _spec_schema(kind: str) -> dict[str, Any]:
    definition = next(d for d in crdgen.DEFINITIONS if d.kind == kind)
    (version,) = crdgen.crd_manifest(definition)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _field(kind: str, path: str) -> dict[str, Any]:
    node = _spec_schema(kind)
    for step in path.split("."):
        name, items = step.removesuffix("[]"), step.endswith("[]")
        node = node["properties"][name]
        if items:
            node = node["items"]
    return node


def _with_query(value: str, query: str) -> str:
    return f"{value}{'&' if '?' in value else '?'}{query}"


def _with_userinfo(value: str) -> str:
    scheme, sep, rest = value.partition("://")
    return f"{scheme}{sep}user:{CANARY}@{rest}"


def _credentialed(value: str, is_url: bool) -> list[str]:
    queries = [
        _with_query(value, f"token={CANARY}"),
        _with_query(value, f"a=1&X-Amz-Signature={CANARY}"),
        _with_query(value, f"%74oken={CANARY}"),  # token, percent-encoded
        _with_query(value, f"%2574oken={CANARY}"),  # encoded twice
        _with_query(value, f"ToK%65n={CANARY}"),
        _with_query(value, f"accessToken={CANARY}"),  # by other names (issue 35, item 1)
        _with_query(value, f"apiToken={CANARY}"),
        _with_query(value, f"token[]={CANARY}"),
        _with_query(value, f"jwt={CANARY}"),
        f"{value};token={CANARY}",  # a matrix parameter
        f"{value}#access_token={CANARY}",  # a fragment
    ]
    return [_with_userinfo(value), *queries] if is_url else queries


def _refused(node: dict[str, Any], value: str) -> list[str]:
    """The messages of the rules on ``node`` that refuse ``value``."""
    refused = []
    for rule in node.get("x-kubernetes-validations") or []:
        match = re.fullmatch(r"!self\.matches\('(.*)'\)", rule["rule"])
        if match and re.search(match.group(1), value):
            refused.append(rule["message"])
    return refused


@pytest.mark.parametrize(("kind", "path", "clean", "is_url", "name"), URL_FIELDS, ids=IDS)
def test_every_url_field_refuses_credentials_at_apply_time(
    kind: str, path: str, clean: str, is_url: bool, name: str
) -> None:
    node = _field(kind, path)
    pattern = node.get("pattern")
    assert _refused(node, clean) == [], clean
    for bad in _credentialed(clean, is_url):
        assert pattern is None or re.search(pattern, bad), f"{bad} breaks {pattern} before the CEL rules"
        messages = _refused(node, bad)
        assert messages and all("CredentialsInUrl" in m for m in messages), (bad, messages)
        assert not any(CANARY in m for m in messages)


@pytest.mark.parametrize(("kind", "path", "clean", "is_url", "name"), URL_FIELDS, ids=IDS)
def test_every_rule_message_names_its_field(
    kind: str, path: str, clean: str, is_url: bool, name: str
) -> None:
    """Each field's messages are its own, so a refusal says which field to fix: userinfo (URLs
    only), a secret-looking parameter, a percent-encoded parameter name, a fragment (a URL's port
    rule is ``test_operator_ports``'s)."""
    rules = _field(kind, path)["x-kubernetes-validations"]
    messages = [r["message"] for r in rules if "PortOutOfRange" not in r["message"]]
    starts = [
        f"{name} must",
        f"{name} query must not carry",
        f"{name} query must not percent-encode",
        f"{name} must not carry a #fragment",
    ]
    starts = starts if is_url else starts[1:]
    assert len(messages) == len(starts)
    assert all(m.startswith(start) for m, start in zip(messages, starts, strict=True)), messages


def test_the_benchmark_target_keeps_its_messages() -> None:
    messages = [r["message"] for r in _field("MCPBenchmark", "target.url")["x-kubernetes-validations"]]
    hint = "must not carry credentials (CredentialsInUrl): send them as spec.target.headers"
    assert messages[0].startswith(f"url {hint}") and messages[1].startswith(f"url query {hint}")
    assert "percent-encode" in messages[2]


@pytest.mark.parametrize(
    "url",
    [
        f"http://u:{CANARY}@h/",
        f"{CANARY}@h:18000",
        f"vllm=http://u:{CANARY}@h/",
        f"http://h/?token={CANARY}",
        f"http://h/x?%74oken={CANARY}",
        f"http://h/x?a=b&%2574oken={CANARY}",
        f"/health?access_token={CANARY}",
        f"http://h/v1?accessToken={CANARY}",
        f"http://h/v1?apiToken={CANARY}",
        f"http://h/v1?token[]={CANARY}",
        f"http://h/v1?jwt={CANARY}",
        f"http://h/v1;token={CANARY}/x",
        f"http://h/v1#access_token={CANARY}",
    ],
)
def test_the_rules_and_the_operator_agree(url: str) -> None:
    """What the CRD refuses the operator refuses too (``url_has_credentials``, for objects an older
    CRD let in); an embedded URL ('vllm=URL') is checked by the operator after the split."""
    assert any(re.search(p, url) for p in (USERINFO, SECRET_PARAM, ENCODED_PARAM, FRAGMENT))
    assert url_has_credentials(url.partition("=")[2] if url.startswith("vllm=") else url)


@pytest.mark.parametrize(
    "url",
    [
        "http://svc/@home",
        "http://h/x?monkey=1&a=b%20c",
        "h:18000",
        "triton",
        "/p?keyboard=1",
        "http://h/v1;v=2?model=llama&stream=1",
    ],
)
def test_clean_values_pass_both(url: str) -> None:
    assert not any(re.search(p, url) for p in (USERINFO, SECRET_PARAM, ENCODED_PARAM, FRAGMENT))
    assert not url_has_credentials(url)


@pytest.mark.parametrize(
    ("name", "refused"),
    [
        ("Authorization", True),
        ("Proxy-Authorization", True),
        ("Cookie", True),
        ("X-Api-Key", True),
        ("X-Auth-Token", True),
        ("X-Tenant", False),
        ("Content-Type", False),
        ("X-Request-Id", False),
    ],
)
def test_a_header_named_like_a_credential_takes_no_literal_value(name: str, refused: bool) -> None:
    """The CRD's rule and the model agree: a credential header's value comes from a Secret, so it
    is never a literal in the object, the run's plan or a report (issue 35, item 1)."""
    node = _spec_schema("MCPBenchmark")["properties"]["target"]["properties"]["headers"]["items"]
    (rule,) = [r for r in node["x-kubernetes-validations"] if "CredentialsInHeader" in r["message"]]
    pattern = re.search(r"matches\('(.*)'\)", rule["rule"])
    assert pattern is not None
    assert bool(re.search(pattern.group(1), f"?{name}=")) is refused
    literal = {"name": name, "value": CANARY}
    if refused:
        with pytest.raises(ValidationError, match="CredentialsInHeader"):
            TargetHeader.model_validate(literal)
    else:
        assert TargetHeader.model_validate(literal).value == CANARY
    assert TargetHeader.model_validate(
        {"name": name, "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    )
