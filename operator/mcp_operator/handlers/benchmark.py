"""kopf handlers for MCPBenchmark: parse, call the benchmark package, write status.

Creation is edge-triggered (create, spec update, resume: ``benchmark.start``); collection is
level-triggered by a timer that compares the Job's actual state with the status
(``benchmark.tick``), so a restarted operator picks up where it was.
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from mcp_bench.api import format_validation_error

from .. import metrics
from ..api.benchmark import KIND, PLURAL, MCPBenchmarkSpec, benchmark_glance, benchmark_status
from ..api.common import GROUP, VERSION
from ..benchmark import start, tick
from ..benchmark.job import run_job_name
from ..conditions import utc_now
from ..targets import SpecProblem
from .common import about_object, announcer, reject, wait_for_names


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("start_benchmark")
@about_object
async def start_benchmark(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    generation, found = int(meta["generation"]), benchmark_status(status)
    if start.already_refused(found, generation):
        return
    try:
        parsed = MCPBenchmarkSpec.model_validate(spec)
    except ValidationError as exc:
        problem = SpecProblem("InvalidSpec", f"spec: {format_validation_error(exc)}")
        _reject(body, patch, start.refused(found, generation, problem, utc_now()))
        return
    job = run_job_name(meta["name"], parsed, generation, found)
    run = start.Run(str(meta["namespace"]), str(meta["name"]), str(meta["uid"]), generation, job)
    if found.job_name == job:
        await start.steer(run, parsed, found, patch.status)
        return
    refused = await start.start_run(run, parsed, found, patch.status, announcer(body))
    if refused is not None and refused.wait:  # not a refusal: DNS may be late; looked at again
        await wait_for_names(body, PLURAL, status, generation, refused.problems)
    if refused is not None:
        _reject(body, patch, refused)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=2.0,
    initial_delay=1.0,
    backoff=2.0,  # after a failure kopf would wait 60 s; the next tick is the retry
    when=lambda status, **_: benchmark_glance(status).collecting,
)
@metrics.counted_errors("collect_benchmark")
@about_object
async def collect_benchmark(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    generation = int(meta["generation"])
    run = tick.Collecting(str(meta["namespace"]), str(meta["name"]), str(meta["uid"]), generation, spec)
    await tick.collect(run, benchmark_status(status), patch.status, announcer(body))


def _reject(body: kopf.Body, patch: kopf.Patch, refused: start.Refused) -> None:
    reject(body, patch, KIND, refused.status, refused.problems)
