"""What Prometheus has loaded, from its ``/api/v1/rules`` answer: each recording rule with its
(re-printed) query, labels, health and when its group last evaluated it. This is the side under
test, never the reference."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_common import rfc3339

from .vector import MalformedAnswer


@dataclass(frozen=True)
class LoadedRule:
    """One loaded definition of a record name (several groups may record the same name).
    ``last_evaluation`` is Unix seconds, None when never evaluated; ``interval_s`` is the
    group's evaluation interval."""

    record: str
    query: str
    labels: tuple[tuple[str, str], ...]
    health: str
    last_error: str
    last_evaluation: float | None
    group: str
    interval_s: float | None
    file: str = ""  # the rules file Prometheus loaded the group from, as it names it


def _instant(text: Any) -> float | None:
    """An RFC 3339 time from the API as Unix seconds; Go's zero time (never evaluated) is None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        stamp = rfc3339.parse(text, zone_required=False)
    except ValueError as exc:
        raise MalformedAnswer(f"/api/v1/rules: {text!r} is not an RFC 3339 time") from exc
    if stamp.year < 1971:
        return None
    return stamp.timestamp()


def _interval(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def loaded_rules(payload: Any) -> list[LoadedRule]:
    """Every recording rule of an ``/api/v1/rules`` answer, in the order Prometheus lists them."""
    try:
        groups = payload["data"]["groups"]
        pairs = [(g, r) for g in groups for r in g["rules"]]
    except (KeyError, TypeError) as exc:
        raise MalformedAnswer("/api/v1/rules: no data.groups[].rules[]") from exc
    out: list[LoadedRule] = []
    for group, rule in pairs:
        if not isinstance(rule, Mapping) or rule.get("type") != "recording":
            continue
        name, query = rule.get("name"), rule.get("query")
        if not isinstance(name, str) or not isinstance(query, str):
            raise MalformedAnswer("/api/v1/rules: a recording rule has no name or query")
        labels = rule.get("labels") or {}
        if not isinstance(labels, Mapping):
            raise MalformedAnswer(f"/api/v1/rules: rule {name} has labels that are not a map")
        last = _instant(rule.get("lastEvaluation"))
        out.append(
            LoadedRule(
                record=name,
                query=query,
                labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
                health=str(rule.get("health", "")),
                last_error=str(rule.get("lastError", "")),
                last_evaluation=last if last is not None else _instant(group.get("lastEvaluation")),
                group=str(group.get("name", "")),
                interval_s=_interval(group.get("interval")),
                file=str(group.get("file") or ""),
            )
        )
    return out
