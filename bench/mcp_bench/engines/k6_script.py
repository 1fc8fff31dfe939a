"""The k6 script for one level of a run plan (generated text; k6 itself is never shipped).

Closed loop: ``constant-vus`` (or ``shared-iterations`` when the stage counts requests). Open loop:
``constant-arrival-rate``, k6's only open-loop executor: constant arrivals, and an arrival with no
free VU is dropped (``dropped_iterations``), so plans must say ``arrival: constant`` and
``overload: drop``. Warm-up runs as its own scenario (``mcp_warmup``) whose points are discarded;
the measured one is ``mcp_measure``. Every iteration adds 1 to the ``mcp_bench_sent`` counter just
before it sends, so requests cut off at the end of the level are counted, not lost.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta

WARMUP_SCENARIO = "mcp_warmup"
MEASURE_SCENARIO = "mcp_measure"
SENT_METRIC = "mcp_bench_sent"
SERVER_MARK = "mcp-bench-server="
# k6 takes integer rates per time unit: a rate of R/s is RATE_SCALE*R per RATE_SCALE seconds.
RATE_SCALE = 1000
NO_DURATION_S = 24 * 3600  # maxDuration of a request-counted level with no time limit

_SCRIPT = """import http from 'k6/http';
import {{ Counter }} from 'k6/metrics';

const CFG = {cfg};
const sent = new Counter('{sent_metric}');
let serverSeen = false;

export const options = {options};

export default function () {{
  sent.add(1);
  const res = http.request(CFG.method, CFG.url, CFG.body, {{
    headers: CFG.headers, timeout: CFG.timeout, redirects: 0, responseType: 'none',
  }});
  if (!serverSeen && res.headers && res.headers['Server']) {{
    serverSeen = true;
    console.log('{server_mark}' + res.headers['Server']);
  }}
}}
"""


def _s(seconds: float) -> str:
    """k6 duration text in milliseconds (k6 rejects fractional seconds in some fields)."""
    return f"{max(0, round(seconds * 1000))}ms"


def _rate(rate: float) -> dict[str, Any]:
    return {"rate": max(1, round(rate * RATE_SCALE)), "timeUnit": f"{RATE_SCALE}s"}


def scenarios(plan: RunPlan, meta: LevelMeta, drain_s: float) -> dict[str, dict[str, Any]]:
    """k6 ``options.scenarios`` for one level."""
    stage = plan.stage
    out: dict[str, dict[str, Any]] = {}
    start = _s(stage.warmup_s)
    if meta.mode == "closed":
        assert meta.concurrency is not None
        vus = meta.concurrency
        if stage.warmup_s > 0:
            out[WARMUP_SCENARIO] = {
                "executor": "constant-vus", "vus": vus, "duration": start, "gracefulStop": "0s",
            }  # fmt: skip
        if stage.requests is not None:
            out[MEASURE_SCENARIO] = {
                "executor": "shared-iterations",
                "vus": min(vus, stage.requests),  # k6 refuses more VUs than iterations
                "iterations": stage.requests,
                "maxDuration": _s(stage.duration_s if stage.duration_s is not None else NO_DURATION_S),
            }
        else:
            assert stage.duration_s is not None
            out[MEASURE_SCENARIO] = {"executor": "constant-vus", "vus": vus, "duration": _s(stage.duration_s)}
    else:
        assert meta.requested_rate is not None
        rate = meta.requested_rate
        cap = plan.levels.max_concurrency
        arrivals = {"executor": "constant-arrival-rate", **_rate(rate), "preAllocatedVUs": cap, "maxVUs": cap}
        if stage.warmup_s > 0:
            out[WARMUP_SCENARIO] = {**arrivals, "duration": start, "gracefulStop": "0s"}
        out[MEASURE_SCENARIO] = {**arrivals, "duration": _s(open_duration_s(plan, rate))}
    out[MEASURE_SCENARIO].update({"startTime": start, "gracefulStop": _s(drain_s)})
    return out


def open_duration_s(plan: RunPlan, rate: float) -> float:
    """Constant arrivals: a request count is a duration (the shorter of the two when both are set)."""
    stage = plan.stage
    limits = [stage.duration_s] if stage.duration_s is not None else []
    if stage.requests is not None:
        limits.append(stage.requests / rate)
    return min(limits)


def k6_script(plan: RunPlan, meta: LevelMeta, drain_s: float) -> str:
    """The whole script; plan values go in as JSON literals, so nothing in them is executed."""
    p = plan.payload
    cfg = {
        "method": p.method,
        "url": plan.url,
        "body": p.body,
        "headers": dict(p.headers),
        "timeout": _s(plan.request_timeout_s),
    }
    options = {
        "scenarios": scenarios(plan, meta, drain_s),
        "discardResponseBodies": True,
        "summaryTrendStats": ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)", "count"],
    }
    return _SCRIPT.format(
        cfg=json.dumps(cfg),
        options=json.dumps(options, indent=2),
        sent_metric=SENT_METRIC,
        server_mark=SERVER_MARK,
    )
