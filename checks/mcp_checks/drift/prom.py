"""Reads a rule's recorded series and its raw expression from Prometheus through
prometheus-api-client (blocking; the caller runs it in a thread).

The raw expression is evaluated at the timestamp of the recorded sample itself (from
``timestamp(<record>)``), which is the instant the rule was evaluated: both sides then see
the same data, and a correct rule drifts 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from .compare import Labels, MalformedAnswer, SeriesDrift, compare, parse_vector
from .spec import RecordingRule


class RuleNotFound(LookupError):
    pass


class RuleUnhealthy(RuntimeError):
    pass


@dataclass(frozen=True)
class RuleDefinition:
    """One definition of a record name (several groups may record the same name)."""

    expr: str
    labels: tuple[tuple[str, str], ...]


def connect(
    url: str, timeout_s: float, headers: Mapping[str, str]
) -> tuple[PrometheusConnect, requests.Session]:
    session = requests.Session()
    retry = Retry(total=1, backoff_factor=0.1, status_forcelist=[502, 503, 504])
    prom = PrometheusConnect(
        url,
        headers=dict(headers) or None,
        retry=retry,
        session=session,
        timeout=timeout_s,
    )
    return prom, session


def rule_definitions(payload: Any, record: str) -> list[RuleDefinition]:
    """The recording rules named ``record`` in an ``/api/v1/rules`` answer."""
    try:
        groups = payload["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
    except (KeyError, TypeError) as exc:
        raise MalformedAnswer("/api/v1/rules: no data.groups[].rules[]") from exc
    found = [
        r
        for r in rules
        if isinstance(r, Mapping) and r.get("type") == "recording" and r.get("name") == record
    ]
    if not found:
        raise RuleNotFound(f"no recording rule {record!r} in /api/v1/rules")
    bad = [r for r in found if r.get("health") == "err"]
    if bad:
        raise RuleUnhealthy(f"recording rule {record} fails to evaluate: {bad[0].get('lastError', '')}")
    out = []
    for r in found:
        if not isinstance(r.get("query"), str):
            raise MalformedAnswer(f"/api/v1/rules: rule {record} has no query")
        out.append(RuleDefinition(r["query"], tuple(sorted((r.get("labels") or {}).items()))))
    return out


def fetch_rules(session: requests.Session, url: str, timeout_s: float, headers: Mapping[str, str]) -> Any:
    resp = session.get(
        f"{url.rstrip('/')}/api/v1/rules", params={"type": "record"}, timeout=timeout_s, headers=dict(headers)
    )
    resp.raise_for_status()
    try:
        return resp.json()
    except ValueError as exc:
        raise MalformedAnswer("/api/v1/rules: not JSON") from exc


def _timestamps(prom: PrometheusConnect, record: str, at: float) -> dict[Labels, float]:
    return parse_vector(
        prom.custom_query(f"timestamp({record})", params={"time": f"{at:.3f}"}), f"timestamp({record})"
    )


def drifts_at(
    prom: PrometheusConnect, record: str, definitions: list[RuleDefinition], at: float
) -> list[SeriesDrift]:
    """Recorded series at ``at``, raw expression at each recorded sample's own timestamp."""
    recorded = parse_vector(prom.custom_query(record, params={"time": f"{at:.3f}"}), record)
    stamps = _timestamps(prom, record, at) if recorded else {}
    instants = sorted(set(stamps.values())) or [at]
    out: list[SeriesDrift] = []
    for instant in instants:
        raw: dict[Labels, float] = {}
        for d in definitions:
            answer = prom.custom_query(d.expr, params={"time": f"{instant:.3f}"})
            for key, value in parse_vector(answer, d.expr, d.labels).items():
                if key in raw:
                    raise MalformedAnswer(f"{record}: two definitions produce the same series")
                raw[key] = value
        mine = {k: v for k, v in recorded.items() if stamps.get(k, at) == instant}
        # a raw series is compared at the instant its recorded twin was written; unmatched ones
        # (raw only) are reported once, at the first instant
        theirs = {k: v for k, v in raw.items() if stamps.get(k, instants[0]) == instant}
        out.extend(compare(mine, theirs, instant))
    return out


def definitions_for(rule: RecordingRule, rules_payload: Any | None) -> list[RuleDefinition]:
    if rule.expr is not None:
        return [RuleDefinition(rule.expr, tuple(sorted(rule.labels)))]
    return rule_definitions(rules_payload, rule.record)
