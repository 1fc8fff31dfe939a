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

from ..dialhooks import OPEN, DialHooks
from .compare import SeriesDrift, compare
from .vector import Labels, MalformedAnswer, parse_vector


@dataclass(frozen=True)
class RuleDefinition:
    """An expression to evaluate for a record, with the labels its rule adds: from the
    reference or the user, never the loaded rule's own query."""

    expr: str
    labels: tuple[tuple[str, str], ...]


def connect(
    url: str, timeout_s: float, headers: Mapping[str, str], dial: DialHooks = OPEN
) -> tuple[PrometheusConnect, requests.Session]:
    """The client and its session; every connection of it (a redirect's too) through ``dial``."""
    session = requests.Session()
    session.trust_env = False  # no HTTP(S)_PROXY: the policy judges the address dialled, not a proxy's
    retry = Retry(total=1, backoff_factor=0.1, status_forcelist=[502, 503, 504])
    prom = PrometheusConnect(
        url,
        headers=dict(headers) or None,
        retry=retry,
        session=session,
        timeout=timeout_s,
    )
    dial.guard(session, url, retry)  # after the client mounted its own adapter on its URL
    return prom, session


def fetch_rules(session: requests.Session, url: str, timeout_s: float, headers: Mapping[str, str]) -> Any:
    resp = session.get(
        f"{url.rstrip('/')}/api/v1/rules", params={"type": "record"}, timeout=timeout_s, headers=dict(headers)
    )
    resp.raise_for_status()
    try:
        return resp.json()
    except ValueError as exc:
        raise MalformedAnswer("/api/v1/rules: not JSON") from exc


def runtime_cwd(
    session: requests.Session, url: str, timeout_s: float, headers: Mapping[str, str]
) -> str | None:
    """Prometheus's working directory (relative rules-file names are relative to it), or None
    when it does not say (an older Prometheus, a proxy that hides the status pages)."""
    resp = session.get(
        f"{url.rstrip('/')}/api/v1/status/runtimeinfo", timeout=timeout_s, headers=dict(headers)
    )
    try:
        cwd = resp.json()["data"]["CWD"] if resp.ok else None
    except (ValueError, KeyError, TypeError):
        return None
    return cwd if isinstance(cwd, str) and cwd else None


def server_time(prom: PrometheusConnect) -> float:
    """Prometheus's own clock (its rules' evaluation times are on it, not on ours)."""
    answer = prom.custom_query("time()")
    try:
        return float(answer[1])
    except (IndexError, TypeError, ValueError) as exc:
        raise MalformedAnswer("time(): not a scalar") from exc


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
