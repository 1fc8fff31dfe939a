"""manifests/monitoring: the alert rules (promtool's own unit tests of each alert firing and
staying quiet), the PrometheusRule and the Grafana dashboard, and that every expression in them
names a metric the operator exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY, generate_latest

import mcp_operator.metrics
from mcp_operator.api.drill import FaultKind

from .conftest import REPO, Run

MONITORING = REPO / "manifests" / "monitoring"
ALERTS = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
DASHBOARD = json.loads((MONITORING / "dashboard.json").read_text())
# a metric name in PromQL: an identifier not followed by "(" (a function) and not a label or
# keyword; label matchers and by/without lists are stripped before matching
_BRACES = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRINGS = re.compile(r'"[^"]*"')
_IDENT = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_NOT_METRICS = {"by", "without", "or", "and", "unless", "bool", "offset", "on", "ignoring", "le", "inf"}
_DURATION = re.compile(r"^\d+[smhdwy]$")


SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}


def exported_names() -> set[str]:
    """Every sample name the operator's process serves on /metrics, as Prometheus sees them
    (counters as ``_total``, histograms as ``_bucket``/``_sum``/``_count``; the process
    collector's too), also for a labelled metric that has no series yet."""
    assert mcp_operator.metrics.READY is not None  # the operator's metrics are registered
    names = set()
    for family in REGISTRY.collect():
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def metric_names(expr: str) -> set[str]:
    text = _STRINGS.sub("", _GROUPING.sub("", _BRACES.sub("", expr)))
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    return {m for m in _IDENT.findall(text) if m.lower() not in _NOT_METRICS and not _DURATION.match(m)}


def _alert_rules() -> list[dict[str, Any]]:
    return [rule for group in ALERTS["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[tuple[str, str]]:
    found = []
    for panel in DASHBOARD["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], target["expr"]))
    return found


def test_rules_are_valid_and_every_alert_fires_and_stays_quiet_in_promtool(promtool: Run) -> None:
    promtool("check", "rules", "alerts.yaml", cwd=MONITORING)
    result = promtool("test", "rules", "alerts.test.yaml", cwd=MONITORING)
    assert "SUCCESS" in result.stdout


def test_the_promtool_tests_cover_every_alert_both_ways() -> None:
    tests = yaml.safe_load((MONITORING / "alerts.test.yaml").read_text())
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in _alert_rules()}
    assert alerts == {
        "MCPReadinessGateFailing",
        "MCPDrillFaultNotReverted",
        "MCPBenchmarkSloMissed",
        "MCPOperatorErrors",
    }
    assert firing == alerts and quiet == alerts


def test_alerts_name_only_exported_metrics() -> None:
    exported = exported_names()
    for rule in _alert_rules():
        names = metric_names(rule["expr"])
        assert names, rule["expr"]
        assert names <= exported, f"{rule['alert']}: {sorted(names - exported)} not exported"
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_prometheusrule_carries_the_same_groups() -> None:
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["spec"] == ALERTS


def test_alerts_see_the_first_event_because_series_start_at_zero() -> None:
    """increase() of a series born at 1 is 0: every counter an alert watches exists at 0 from
    the start, for every label value it alerts on."""
    text = generate_latest(REGISTRY).decode()
    assert 'mcp_operator_verdicts_total{kind="MCPBenchmark",verdict="Fail"}' in text
    for kind in FaultKind.__args__:
        assert f'mcp_operator_fault_revert_failures_total{{kind="{kind}"}}' in text
    assert set(mcp_operator.metrics.FAULT_KINDS) == set(FaultKind.__args__)
    assert 'mcp_operator_errors_total{handler="drill"}' in text


def test_dashboard_panels_query_exported_metrics() -> None:
    exported = exported_names()
    exprs = _dashboard_exprs()
    assert len(exprs) >= 10
    seen: set[str] = set()
    for title, expr in exprs:
        names = metric_names(expr)
        assert names, f"{title}: {expr} names no metric"
        assert names <= exported, f"{title}: {sorted(names - exported)} not exported by the operator"
        seen |= names
    ours = {n for n in exported if n.startswith("mcp_operator_") and not n.endswith("_created")}
    # every metric of the operator has a panel (histograms through their buckets)
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in ours}
    shown = {re.sub(r"_(bucket|sum|count)$", "", n) for n in seen}
    assert families <= shown, sorted(families - shown)


def test_dashboard_is_well_formed() -> None:
    assert DASHBOARD["uid"] == "mcp-operator" and DASHBOARD["title"] == "mcp-operator"
    ids = [panel["id"] for panel in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in DASHBOARD["templating"]["list"]}
    assert variables == {"datasource", "job", "namespace"}
    for panel in DASHBOARD["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_dashboard_expressions_parse_as_promql(promtool: Run, tmp_path: Path) -> None:
    """Each panel query, Grafana's variables filled in, as a recording rule promtool checks."""
    rules = []
    for index, (_title, expr) in enumerate(_dashboard_exprs()):
        concrete = expr.replace("$__rate_interval", "5m").replace("$job", ".*").replace("$namespace", ".*")
        rules.append({"record": f"dashboard:panel_{index}", "expr": concrete})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", str(path))
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (kind) (increase(mcp_operator_x_total{kind="a"}[30m])) > 0', {"mcp_operator_x_total"}),
        ("histogram_quantile(0.99, sum by (le, check) (rate(m_bucket[5m])))", {"m_bucket"}),
        ("count(a == 0) or vector(0)", {"a"}),
        ('process_resident_memory_bytes{job=~".*"} / 2^20', {"process_resident_memory_bytes"}),
    ],
)
def test_metric_names_are_found_in_expressions(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names
