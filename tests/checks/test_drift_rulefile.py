"""The one parser for the rules-file structure: a rules file, a PrometheusRule's spec, and
PrometheusRule manifests in a file all read the same way; anything else is refused, never read
as no rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_checks.drift import (
    ExpectedRule,
    ReferenceMalformed,
    ReferenceNotFound,
    RulesFile,
    parse_groups,
    parse_rules_text,
)

RULES_FILE = """\
groups:
  - name: bed
    interval: 30s
    rules:
      - record: route:bed_requests:rate1m
        expr: sum by (route) (rate(bed_requests_total[1m]))
      - alert: BedDown
        expr: up == 0
      - record: route:bed_requests_drifted:rate1m
        expr: |
          sum by (route) (
            rate(bed_requests_total[1m])
          )
        labels:
          team: inference
          tier: 1
  - name: empty
    rules: []
"""


def test_a_rules_file_gives_its_recording_rules_and_skips_alerts() -> None:
    rules = parse_rules_text(RULES_FILE, "rules.yaml")
    assert [r.record for r in rules] == ["route:bed_requests:rate1m", "route:bed_requests_drifted:rate1m"]
    drifted = rules[1]
    assert drifted.labels == (("team", "inference"), ("tier", "1"))  # values as strings
    assert drifted.group == "bed" and drifted.origin == "rules.yaml"
    assert "rate(bed_requests_total[1m])" in drifted.expr


def test_a_prometheusrule_spec_is_the_same_structure() -> None:
    spec = {"groups": [{"name": "g", "rules": [{"record": "a:b", "expr": "sum(x)"}]}]}
    assert parse_groups(spec, "PrometheusRule ns/r") == [
        ExpectedRule("a:b", "sum(x)", (), "g", "PrometheusRule ns/r")
    ]


def test_prometheusrule_manifests_in_a_file_read_through_their_spec() -> None:
    text = """\
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: one}
spec:
  groups: [{name: g1, rules: [{record: a:one, expr: "1"}]}]
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: two}
spec:
  groups: [{name: g2, rules: [{record: a:two, expr: sum(y)}]}]
"""
    rules = parse_rules_text(text, "rules.yaml")
    assert [(r.record, r.expr, r.origin) for r in rules] == [
        ("a:one", "1", "rules.yaml (PrometheusRule one)"),  # YAML's number read back as PromQL text
        ("a:two", "sum(y)", "rules.yaml (PrometheusRule two)"),
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("groups: {}", "no groups list"),
        ("[1, 2]", "no groups list"),
        ("groups: [{rules: []}]", "has no name"),
        ("groups: [{name: g, rules: {a: 1}}]", "not a list"),
        ("groups: [{name: g, rules: [{expr: up}]}]", "neither record nor alert"),
        ("groups: [{name: g, rules: [{record: r}]}]", "record r\\) has no expr"),
        ("groups: [{name: g, rules: [{record: r, expr: up, labels: [a]}]}]", "not a map"),
        ("groups: [name: : :", "not YAML"),
        ("kind: PrometheusRule\nspec: {}", "no groups list"),
    ],
)
def test_what_is_not_a_rules_file_is_refused(text: str, match: str) -> None:
    with pytest.raises(ReferenceMalformed, match=match):
        parse_rules_text(text, "ref")


def test_a_rules_file_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES_FILE)
    rules = RulesFile(path).load(1.0)
    assert len(rules) == 2 and rules[0].origin == str(path)
    assert RulesFile(path).describe() == f"file {path}"
    with pytest.raises(ReferenceNotFound, match="does not exist"):
        RulesFile(tmp_path / "absent.yaml").load(1.0)
