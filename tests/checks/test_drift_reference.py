"""Reference sources in a cluster, through the real kubernetes client against a small HTTP API:
PrometheusRule objects by name or label, a rules file in a ConfigMap key, and the answers that
are no reference (absent, forbidden, no PrometheusRule kind served)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client
from tests.httpserve import send_json

from mcp_checks.drift import (
    ConfigMapRules,
    PrometheusRuleObjects,
    ReferenceMalformed,
    ReferenceNotFound,
    ReferenceUnreadable,
)

RULES_PATH = "/apis/monitoring.coreos.com/v1/namespaces/{ns}/prometheusrules"


def prometheus_rule(name: str, labels: dict[str, str], record: str, expr: str) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": "mon", "labels": labels},
        "spec": {"groups": [{"name": name, "interval": "30s", "rules": [{"record": record, "expr": expr}]}]},
    }


OBJECTS = {
    "bed": prometheus_rule("bed", {"team": "inference"}, "route:bed:rate1m", "sum by (route) (rate(x[1m]))"),
    "other": prometheus_rule("other", {"team": "search"}, "route:other:rate1m", "sum(y)"),
}
CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "prom-rules", "namespace": "mon"},
    "data": {
        "rules.yaml": "groups:\n- name: g\n  rules:\n  - record: a:b\n    expr: sum(up)\n",
        "prometheus.yml": "global: {scrape_interval: 15s}\n",
    },
}


def _status(code: int) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}


@pytest.fixture(scope="module")
def api() -> Iterator[client.ApiClient]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            code, body = 404, _status(404)
            if url.path.startswith(RULES_PATH.format(ns="denied")):
                code, body = 403, _status(403)
            elif url.path == RULES_PATH.format(ns="mon"):
                wanted = dict(
                    term.split("=", 1)
                    for term in parse_qs(url.query).get("labelSelector", [""])[0].split(",")
                    if term
                )
                items = [o for o in OBJECTS.values() if wanted.items() <= o["metadata"]["labels"].items()]
                code, body = (
                    200,
                    {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRuleList", "items": items},
                )
            elif url.path.startswith(RULES_PATH.format(ns="mon") + "/"):
                name = url.path.rsplit("/", 1)[1]
                if name in OBJECTS:
                    code, body = 200, OBJECTS[name]
            elif url.path == "/api/v1/namespaces/mon/configmaps/prom-rules":
                code, body = 200, CONFIG_MAP
            send_json(self, code, body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_port}"
    cfg.retries = 0
    try:
        with client.ApiClient(cfg) as api_client:
            yield api_client
    finally:
        server.shutdown()
        server.server_close()


def test_one_prometheusrule_by_name(api: client.ApiClient) -> None:
    [rule] = PrometheusRuleObjects(api, "mon", "bed").load(5)
    assert (rule.record, rule.expr, rule.origin) == (
        "route:bed:rate1m",
        "sum by (route) (rate(x[1m]))",
        "PrometheusRule mon/bed",
    )


def test_prometheusrules_by_label_or_all_of_the_namespace(api: client.ApiClient) -> None:
    picked = PrometheusRuleObjects(api, "mon", selector={"team": "inference"})
    assert [r.record for r in picked.load(5)] == ["route:bed:rate1m"]
    assert picked.describe() == "PrometheusRules of mon selected by team=inference"
    every = PrometheusRuleObjects(api, "mon").load(5)
    assert [r.origin for r in every] == ["PrometheusRule mon/bed", "PrometheusRule mon/other"]


def test_no_prometheusrule_is_no_reference(api: client.ApiClient) -> None:
    with pytest.raises(ReferenceNotFound, match="PrometheusRule mon/absent not found"):
        PrometheusRuleObjects(api, "mon", "absent").load(5)
    with pytest.raises(ReferenceNotFound, match="no PrometheusRules of mon selected by team=none"):
        PrometheusRuleObjects(api, "mon", selector={"team": "none"}).load(5)
    with pytest.raises(ReferenceNotFound, match="serves no PrometheusRule kind"):
        PrometheusRuleObjects(api, "elsewhere").load(5)  # 404 on the list: the CRD is not there
    with pytest.raises(ReferenceUnreadable, match="access denied \\(403\\)"):
        PrometheusRuleObjects(api, "denied").load(5)


def test_a_rules_file_in_a_configmap_key(api: client.ApiClient) -> None:
    [rule] = ConfigMapRules(api, "mon", "prom-rules", "rules.yaml").load(5)
    assert (rule.record, rule.origin) == ("a:b", "ConfigMap mon/prom-rules[rules.yaml]")
    with pytest.raises(ReferenceNotFound, match=r"has no key 'absent\.yaml'"):
        ConfigMapRules(api, "mon", "prom-rules", "absent.yaml").load(5)
    with pytest.raises(ReferenceNotFound, match="ConfigMap mon/nope not found"):
        ConfigMapRules(api, "mon", "nope", "rules.yaml").load(5)
    with pytest.raises(ReferenceMalformed, match="no groups list"):
        ConfigMapRules(api, "mon", "prom-rules", "prometheus.yml").load(5)  # a key that is no rules file


def test_an_api_server_that_does_not_answer_is_unreadable() -> None:
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:1"
    cfg.retries = 0
    with client.ApiClient(cfg) as dead, pytest.raises(ReferenceUnreadable, match="did not answer"):
        PrometheusRuleObjects(dead, "mon", "bed").load(2)
