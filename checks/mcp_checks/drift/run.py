"""The recording-rule drift check: for each rule, the recorded series against an independent
expression (the rule's own ``expr``, or the reference's definition, never the query Prometheus
reports for it), per series, against a relative threshold; with a reference, also whether
Prometheus has loaded the rule as the reference defines it. The worst rule decides."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from ..config.assessment import Assessment, combine
from ..verdict import CheckOutcome, Verdict, worst
from .compare import SeriesDrift, assess_rule, pct
from .independence import loaded_file, needs_cwd
from .loaded import LoadedRule, loaded_rules
from .normalise import Normaliser
from .prom import RuleDefinition, connect, drifts_at, fetch_rules, runtime_cwd, server_time
from .reference import ReferenceNotFound, ReferenceNotIndependent, ReferenceUnreadable, RulesFile
from .rulefile import ExpectedRule, ReferenceMalformed
from .spec import MetricDriftSpec, RecordingRule
from .vector import MalformedAnswer
from .verify import verify_loaded

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


@dataclass(frozen=True)
class _Round:
    """What one measurement reads once for all its rules."""

    prom: PrometheusConnect
    spec: MetricDriftSpec
    source: str
    loaded: list[LoadedRule]
    expected: list[ExpectedRule] | None  # None: no reference, or it could not be read
    reference_failure: Assessment | None
    normaliser: Normaliser
    prom_now: float  # Prometheus's clock, for evaluation lag
    now: float


def _read_reference(spec: MetricDriftSpec) -> tuple[list[ExpectedRule] | None, Assessment | None]:
    """The reference's rules, or why there are none (a row for each rule that needed them)."""
    if spec.reference is None:
        return None, None
    what = spec.reference.describe()
    try:
        return spec.reference.load(spec.timeout_s), None
    except ReferenceNotFound as exc:
        return None, Assessment(Verdict.INCONCLUSIVE, "ReferenceNotFound", str(exc))
    except ReferenceUnreadable as exc:
        return None, Assessment(Verdict.INCONCLUSIVE, "ReferenceUnreadable", str(exc))
    except ReferenceNotIndependent as exc:
        return None, Assessment(Verdict.INCONCLUSIVE, "ReferenceNotIndependent", str(exc))
    except ReferenceMalformed as exc:
        return None, Assessment(Verdict.ERROR, "ReferenceMalformed", f"{what}: {exc}")


def _own_rules_file(
    spec: MetricDriftSpec, loaded: list[LoadedRule], session: requests.Session, source: str
) -> Assessment | None:
    """A reference file that is one of the files this Prometheus loaded its rules from is the
    side under test, not a reference."""
    if not isinstance(spec.reference, RulesFile):
        return None
    files = {rule.file for rule in loaded}
    cwd = None
    if needs_cwd(files):
        cwd = runtime_cwd(session, spec.prometheus_url, spec.timeout_s, spec.headers)
    name = loaded_file(spec.reference.path, files, cwd)
    if name is None:
        return None
    return Assessment(
        Verdict.INCONCLUSIVE,
        "ReferenceNotIndependent",
        f"{spec.reference.describe()} is the rules file {source} loaded ({name} in /api/v1/rules): "
        "its rules are the ones under test and cannot vouch for themselves; give the rules as "
        "reviewed (a PrometheusRule, a ConfigMap, the file from the GitOps source)",
    )


def _drift(r: _Round, record: str, definitions: list[RuleDefinition]) -> Assessment:
    """The recorded series against the independent expressions, at the rule's own instants."""
    try:
        drifts: list[SeriesDrift] = []
        for at in r.spec.instants(r.now):
            drifts.extend(drifts_at(r.prom, record, definitions, at))
    except PrometheusApiClientException as exc:
        code = STATUS.search(str(exc))
        status = int(code.group(1)) if code else 0
        if status in (400, 422):
            return Assessment(
                Verdict.ERROR, "QueryRejected", f"{r.source} rejected a query of rule {record} ({status})"
            )
        return Assessment(
            Verdict.INCONCLUSIVE,
            "PrometheusQueryFailed",
            f"{r.source} answered {status or 'an error'} for rule {record}",
        )
    return assess_rule(record, drifts, r.spec.threshold, r.spec.warn_threshold, r.source)


def _merge(first: Assessment, second: Assessment) -> Assessment:
    """One rule's row part from two: the worse decides, and both keep their figures."""
    outcome = worst([first.outcome, second.outcome])
    culprits = [p for p in (first, second) if p.outcome == outcome]
    return Assessment(
        outcome,
        culprits[0].reason,
        "; ".join(p.message for p in culprits),
        first.findings + second.findings,
        {**first.observed, **second.observed},
    )


def _without_reference(r: _Round, record: str) -> Assessment:
    """A rule only Prometheus could describe: it is never a pass, since comparing the loaded
    rule with its own query finds no drift whatever it records."""
    mine = [rule for rule in r.loaded if rule.record == record]
    if not mine:
        return Assessment(
            Verdict.INCONCLUSIVE,
            "RecordingRuleNotFound",
            f"no recording rule {record!r} in /api/v1/rules of {r.source}",
        )
    bad = [rule for rule in mine if rule.health == "err"]
    if bad:
        return Assessment(
            Verdict.FAIL,
            "RecordingRuleUnhealthy",
            f"recording rule {record} fails to evaluate: {bad[0].last_error}",
        )
    return Assessment(
        Verdict.INCONCLUSIVE,
        "NoIndependentReference",
        f"{record}: nothing independent to compare with: its expression would come from {r.source} "
        "itself, so the rule would be compared with itself; give the rule's expr, or a reference "
        "(reference.prometheusRules or reference.configMap; mcp-check drift --reference-file)",
    )


def _rule_part(r: _Round, rule: RecordingRule) -> Assessment:
    if rule.expr is not None:  # the user's expression is the reference
        return _drift(r, rule.record, [RuleDefinition(rule.expr, tuple(sorted(rule.labels)))])
    if r.spec.reference is None:
        return _without_reference(r, rule.record)
    if r.reference_failure is not None:
        failure = r.reference_failure
        return Assessment(failure.outcome, failure.reason, f"{rule.record}: {failure.message}")
    expected = [e for e in r.expected or [] if e.record == rule.record]
    if not expected:
        return Assessment(
            Verdict.INCONCLUSIVE,
            "RuleNotInReference",
            f"{rule.record}: {r.spec.reference.describe()} defines no recording rule {rule.record}, "
            "so there is nothing independent to compare with",
        )
    loaded = [x for x in r.loaded if x.record == rule.record]
    structure = verify_loaded(rule.record, expected, loaded, r.normaliser.compare, r.prom_now, r.source)
    if structure.reason in ("RuleNotLoaded", "RecordingRuleUnhealthy"):
        return structure  # no series to measure, or none worth measuring
    numbers = _drift(r, rule.record, [RuleDefinition(e.expr, e.labels) for e in expected])
    return _merge(structure, numbers)


def measure(spec: MetricDriftSpec) -> list[Assessment]:
    """Blocking: every rule's assessment, or the exceptions that stop them all."""
    source = redact(spec.prometheus_url)
    needs_loaded = any(r.expr is None for r in spec.rules)
    expected, failure = _read_reference(spec) if needs_loaded else (None, None)
    prom, session = connect(spec.prometheus_url, spec.timeout_s, spec.headers, spec.dial)
    try:
        loaded: list[LoadedRule] = []
        if needs_loaded:
            loaded = loaded_rules(fetch_rules(session, spec.prometheus_url, spec.timeout_s, spec.headers))
        own = _own_rules_file(spec, loaded, session, source) if expected is not None else None
        if own is not None:
            expected, failure = None, own
        now = time.time()
        prom_now = server_time(prom) if expected else now
        normaliser = Normaliser(session, spec.prometheus_url, spec.timeout_s, spec.headers)
        r = _Round(prom, spec, source, loaded, expected, failure, normaliser, prom_now, now)
        return [_rule_part(r, rule) for rule in spec.rules]
    except (requests.ConnectionError, requests.Timeout) as exc:
        why = spec.dial.refusal(exc) or type(exc).__name__  # the error's text may quote a query
        raise Unreachable(f"{source} is unreachable ({why})") from None
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
        parts = await asyncio.wait_for(asyncio.to_thread(measure, spec), spec.timeout_s * (3 + spec.points))
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
