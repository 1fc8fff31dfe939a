"""The Prometheus rules-file structure, ``groups: [{name, interval, rules: [{record, expr,
labels}]}]``, which a prometheus-operator PrometheusRule's ``spec`` shares: one parser for a
rules file, a ConfigMap key holding one, and PrometheusRule objects.

The recording rules it yields are what was reviewed and deployed, the independent side a drift
check compares Prometheus's loaded rules with. Alerting rules are skipped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml


class ReferenceMalformed(ValueError):
    """The reference is there but is not a rules file (nor a PrometheusRule)."""


class ReferenceNotIndependent(ValueError):
    """The reference is what the Prometheus under test reports, not what was reviewed: its own
    rules file, or its ``/api/v1/rules`` answer written down."""


@dataclass(frozen=True)
class ExpectedRule:
    """One recording rule as the reference defines it; ``origin`` says where it was read
    (``PrometheusRule ns/name``, ``ConfigMap ns/name[key]``, a file path)."""

    record: str
    expr: str
    labels: tuple[tuple[str, str], ...]
    group: str
    origin: str


def _rule(raw: Any, group: str, origin: str, where: str) -> ExpectedRule | None:
    if not isinstance(raw, Mapping):
        raise ReferenceMalformed(f"{origin}: {where} is not a mapping")
    if "alert" in raw and "record" not in raw:
        return None
    record, expr = raw.get("record"), raw.get("expr")
    if not isinstance(record, str) or not record:
        raise ReferenceMalformed(f"{origin}: {where} has neither record nor alert")
    if isinstance(expr, int | float) and not isinstance(expr, bool):
        expr = str(expr)  # YAML reads `expr: 1` as a number; PromQL reads it as the scalar
    if not isinstance(expr, str) or not expr.strip():
        raise ReferenceMalformed(f"{origin}: {where} (record {record}) has no expr")
    labels = raw.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ReferenceMalformed(f"{origin}: {where} (record {record}) has labels that are not a map")
    pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items()))
    return ExpectedRule(record, expr, pairs, group, origin)


def parse_groups(doc: Any, origin: str) -> list[ExpectedRule]:
    """The recording rules of a ``{groups: [...]}`` document (a rules file, or a PrometheusRule's
    ``spec``); anything that is not that shape is refused rather than read as no rules."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("groups"), list):
        raise ReferenceMalformed(f"{origin}: no groups list (not a Prometheus rules file)")
    out: list[ExpectedRule] = []
    for i, group in enumerate(doc["groups"]):
        if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
            raise ReferenceMalformed(f"{origin}: groups[{i}] has no name")
        rules = group.get("rules") or []
        if not isinstance(rules, list):
            raise ReferenceMalformed(f"{origin}: group {group['name']} has rules that are not a list")
        for j, raw in enumerate(rules):
            rule = _rule(raw, group["name"], origin, f"group {group['name']} rules[{j}]")
            if rule is not None:
                out.append(rule)
    return out


def _rules_api_answer(doc: Any) -> bool:
    """Prometheus's ``/api/v1/rules`` answer (or its ``data``): rules with a ``query``, where a
    rules file has ``expr``."""
    if isinstance(doc, Mapping) and isinstance(doc.get("data"), Mapping):
        doc = doc["data"]
    groups = doc.get("groups") if isinstance(doc, Mapping) else None
    if not isinstance(groups, list):
        return False
    rules = [
        r for g in groups if isinstance(g, Mapping) and isinstance(g.get("rules"), list) for r in g["rules"]
    ]
    return any(isinstance(r, Mapping) and "query" in r and "expr" not in r for r in rules)


def parse_rules_text(text: str, origin: str) -> list[ExpectedRule]:
    """A rules file, or PrometheusRule manifests (one or several YAML documents): the same
    groups structure either way."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ReferenceMalformed(f"{origin}: not YAML ({type(exc).__name__})") from None
    if not docs:
        raise ReferenceMalformed(f"{origin}: empty")
    out: list[ExpectedRule] = []
    for doc in docs:
        if _rules_api_answer(doc):
            raise ReferenceNotIndependent(
                f"{origin} is a Prometheus /api/v1/rules answer (rules with query, not expr): "
                "what a Prometheus loaded, not the rules as reviewed"
            )
        if isinstance(doc, Mapping) and doc.get("kind") == "PrometheusRule":
            name = (doc.get("metadata") or {}).get("name", "?")
            out.extend(parse_groups(doc.get("spec"), f"{origin} (PrometheusRule {name})"))
        else:
            out.extend(parse_groups(doc, origin))
    return out
