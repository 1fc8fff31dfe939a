"""The recording-rule drift check: for each rule, the recorded series against the raw
expression, per series, against a relative threshold; the worst rule decides."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from ..config.assessment import Assessment, combine
from ..verdict import CheckOutcome, Verdict
from .compare import MalformedAnswer, SeriesDrift, assess_rule, pct
from .prom import RuleNotFound, RuleUnhealthy, connect, definitions_for, drifts_at, fetch_rules
from .spec import MetricDriftSpec, RecordingRule

CHECK_NAME = "metric-drift"
STATUS = re.compile(r"HTTP Status Code (\d{3})")


def redact(url: str) -> str:
    """A URL as it may be shown: no user or password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Unreachable(Exception):
    pass


def _rule_part(
    prom: PrometheusConnect, spec: MetricDriftSpec, rule: RecordingRule, rules: Any, source: str, now: float
) -> Assessment:
    try:
        definitions = definitions_for(rule, rules)
    except RuleNotFound as exc:
        return Assessment(Verdict.INCONCLUSIVE, "RecordingRuleNotFound", f"{exc} of {source}")
    except RuleUnhealthy as exc:
        return Assessment(Verdict.FAIL, "RecordingRuleUnhealthy", str(exc))
    try:
        drifts: list[SeriesDrift] = []
        for at in spec.instants(now):
            drifts.extend(drifts_at(prom, rule.record, definitions, at))
    except PrometheusApiClientException as exc:
        code = STATUS.search(str(exc))
        status = int(code.group(1)) if code else 0
        if status in (400, 422):
            return Assessment(
                Verdict.ERROR, "QueryRejected", f"{source} rejected a query of rule {rule.record} ({status})"
            )
        return Assessment(
            Verdict.INCONCLUSIVE,
            "PrometheusQueryFailed",
            f"{source} answered {status or 'an error'} for rule {rule.record}",
        )
    return assess_rule(rule.record, drifts, spec.threshold, spec.warn_threshold, source)


def measure(spec: MetricDriftSpec) -> list[Assessment]:
    """Blocking: every rule's assessment, or the exceptions that stop them all."""
    source = redact(spec.prometheus_url)
    prom, session = connect(spec.prometheus_url, spec.timeout_s, spec.headers)
    try:
        rules = None
        if any(r.expr is None for r in spec.rules):
            rules = fetch_rules(session, spec.prometheus_url, spec.timeout_s, spec.headers)
        now = time.time()
        return [_rule_part(prom, spec, rule, rules, source, now) for rule in spec.rules]
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise Unreachable(f"{source} is unreachable ({type(exc).__name__})") from None
    finally:
        session.close()


def _thresholds(spec: MetricDriftSpec) -> dict[str, str]:
    out = {"maxRelativeDrift": f"< {pct(spec.threshold)}"}
    if spec.warn_threshold is not None:
        out["warnRelativeDrift"] = f">= {pct(spec.warn_threshold)}"
    return out


async def run_metric_drift(spec: MetricDriftSpec) -> CheckOutcome:
    """Measure in a thread, bounded by the spec's timeout; no answer is never a pass."""
    source = redact(spec.prometheus_url)

    def one(verdict: Verdict, reason: str, message: str) -> CheckOutcome:
        return combine(CHECK_NAME, [Assessment(verdict, reason, message)], source, _thresholds(spec))

    try:
        parts = await asyncio.wait_for(asyncio.to_thread(measure, spec), spec.timeout_s * (1 + spec.points))
    except Unreachable as exc:
        return one(Verdict.INCONCLUSIVE, "PrometheusUnreachable", str(exc))
    except TimeoutError:
        return one(Verdict.INCONCLUSIVE, "PrometheusTimeout", f"{source} did not answer in time")
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else 0
        return one(Verdict.ERROR, "RulesApiFailed", f"{source}/api/v1/rules answered {status}")
    except (MalformedAnswer, ValueError, KeyError, TypeError) as exc:
        return one(Verdict.ERROR, "MalformedPrometheusAnswer", f"{source}: {exc}")
    return combine(CHECK_NAME, parts, source, _thresholds(spec))
