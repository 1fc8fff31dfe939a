"""A port outside 1-65535 in any URL field of either resource is refused at apply time, by a CEL
rule (``mcp_operator.api.ports``) every URL field carries beside its no-credentials rules, with a
message naming the field; the field's own pattern admits such a value, so the refusal is the port
rule's. The rule agrees with Python's URL parser, which raised on such a port deep in the
operator (the prober's per-target bound, the benchmark's preflight)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.operator.test_operator_credentials import _field, _refused, _spec_schema

from mcp_operator.api.credentials import USERINFO
from mcp_operator.api.ports import BAD_PORT

# (kind, field path in the spec schema, a value with a port, the name its messages start with)
URL_FIELDS = [
    ("MCPReadiness", "target.url", "http://svc:8000/v1", "url"),
    ("MCPReadiness", "checks.xdsSync.sources[].address", "istiod:15010", "xDS source address"),
    ("MCPReadiness", "checks.xdsSync.sources[].address", "http://istiod:15014", "xDS source address"),
    ("MCPReadiness", "checks.metricDrift.prometheusUrl", "http://prom:9090", "prometheusUrl"),
    ("MCPReadiness", "drill.serverRequests.urls[]", "http://svc:8000/metrics", "serverRequests url"),
    ("MCPBenchmark", "target.url", "http://svc:8000/v1", "url"),
    ("MCPBenchmark", "target.url", "svc:8000", "url"),
    ("MCPBenchmark", "observe.serverMetrics[]", "vllm=http://vllm:8000/metrics", "serverMetrics entry"),
    ("MCPBenchmark", "observe.serverMetrics[]", "http://vllm:8000/metrics", "serverMetrics entry"),
    ("MCPBenchmark", "observe.tritonStats[]", "resnet=http://triton:8002", "tritonStats entry"),
    ("MCPBenchmark", "observe.prometheus.url", "http://prom:9090", "prometheus url"),
    ("MCPBenchmark", "workload.images.urlBase", "http://images:8080/pool", "urlBase"),
    ("MCPBenchmark", "workload.classes[].images.urlBase", "http://images:8080/pool", "urlBase"),
]
IDS = [f"{kind}.{path}={value}" for kind, path, value, _ in URL_FIELDS]


def _with_port(value: str, port: str) -> str:
    return re.sub(r":[0-9]+", f":{port}", value, count=1)


@pytest.mark.parametrize(("kind", "path", "value", "name"), URL_FIELDS, ids=IDS)
def test_every_url_field_refuses_a_port_out_of_range_by_name(
    kind: str, path: str, value: str, name: str
) -> None:
    node = _field(kind, path)
    pattern = node.get("pattern")
    for good in ("1", "80", "08000", "65535"):
        assert _refused(node, _with_port(value, good)) == [], good
    message = f"{name} port must be between 1 and 65535 (PortOutOfRange)"
    for bad in ("0", "00", "65536", "70000", "99999", "100000", "0099999"):
        url = _with_port(value, bad)
        admitted = pattern is None or re.search(pattern, url)  # a pattern may refuse 6 digits itself
        assert admitted or len(bad) > 5, f"{url} breaks {pattern} before the CEL rules"
        assert not admitted or _refused(node, url) == [message], url


def _walk(schema: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [schema]
    for child in (schema.get("properties") or {}).values():
        nodes += _walk(child)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            nodes += _walk(schema[key])
    return nodes


@pytest.mark.parametrize("kind", ["MCPReadiness", "MCPBenchmark"])
def test_every_field_that_takes_a_url_has_the_port_rule(kind: str) -> None:
    """A URL field is one with the userinfo rule (paths have only the query rules): each of them
    carries the port rule too, so a new URL field cannot forget it."""
    for node in _walk(_spec_schema(kind)):
        rules = [r["rule"] for r in node.get("x-kubernetes-validations") or []]
        if any(USERINFO in rule for rule in rules):
            assert any(BAD_PORT in rule for rule in rules), node.get("description")


def _python_refuses(url: str) -> bool:
    try:
        return urlsplit(url).port == 0
    except ValueError:
        return True


@given(port=st.integers(min_value=0, max_value=10**7) | st.sampled_from([1, 65535, 65536, 0]))
def test_the_rule_agrees_with_python_on_every_port(port: int) -> None:
    for url in (
        f"http://h:{port}",
        f"http://h:{port}/x?a=1",
        f"https://[::1]:{port}#f",
        f"vllm=http://h:{port}",
    ):
        assert bool(re.search(BAD_PORT, url)) == _python_refuses(url.removeprefix("vllm=")), url
    assert bool(re.search(BAD_PORT, f"h:{port}")) == (not 1 <= port <= 65535)


@pytest.mark.parametrize(
    "value",
    [
        "http://[::1]/x",  # an IPv6 host's colons are no port
        "http://[fe80::99999]/x",
        "http://h/x:99999",  # a colon in the path
        "http://h/x?at=h:99999",  # or in the query
        "http://h#frag:0",
        "triton",
        "model:v99999=http://h:8000",  # at most a name, then the URL's own port
    ],
)
def test_colons_that_are_no_port_are_left_alone(value: str) -> None:
    assert not re.search(BAD_PORT, value)
