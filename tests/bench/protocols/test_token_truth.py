"""Per-token truth at the reference concurrency: 512 streams against a server that logs its writes.

The reference server runs in its own process and records every streamed chunk's write instant
(``/debug/timings``); the lean OpenAI client stamps each chunk with the kernel's receive time. So
the client's ITL and TPOT must match the gaps the server really produced, even with 512 streams
on this small, shared host where the client itself is far from idle (one process, and two worker
processes: the path used at scale). The bounds are generous (2 ms at P99; measured here about
0.1 ms), yet a client that stamped tokens when its loop got round to them misses the ITL P99 by
its loop's backlog (about 3 ms here at 512 streams, with the stamps switched off).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mcp_bench.engines import run_plan_sync
from mcp_bench.plan import RunPlan
from mcp_bench.protocols import rx_stamps

STREAMS = 512
TTFT_MS, TPOT_MS, TOKENS = 100.0, 100.0, 5
# |reported - server truth| at P50 and P99 (ms)
ITL_BOUND = (1.0, 2.0)
TPOT_BOUND = (1.0, 2.0)
LATE_OK_MS = 2.0  # the server's writes at most this far past their deadlines (P99): it kept its model

pytestmark = [
    pytest.mark.timing,
    pytest.mark.skipif(not rx_stamps.AVAILABLE, reason="kernel receive stamps need Linux"),
]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """The reference server in its own process (its precise loop, not the test's)."""
    cmd = [sys.executable, "-m", "mcp_refserver", "--port", "0", "--ttft-ms", str(TTFT_MS)]
    cmd += ["--tpot-ms", str(TPOT_MS), "--default-max-tokens", str(TOKENS)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    try:
        assert port.isdigit(), f"refserver did not start: {port!r}"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _timings(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/debug/timings?reset=1", timeout=60) as r:
        data: dict[str, Any] = json.loads(r.read())
    return data


@pytest.mark.parametrize("workers", [1, 2])
def test_itl_and_tpot_match_the_servers_writes_at_512_streams(server_url: str, workers: int) -> None:
    plan = RunPlan.model_validate(
        {
            "url": server_url,
            "workers": workers,
            "backend": "openai",
            "model": "refmodel",
            "levels": {"concurrency": [STREAMS], "connections": "warm"},
            "stage": {"warmup_s": 0.5, "duration_s": 3.0},
            "request_timeout_s": 30,
            "payload": {"prompt": "one two three", "max_output_tokens": TOKENS, "stream": True},
        }
    )
    _timings(server_url)
    level = run_plan_sync(plan).levels[0]
    time.sleep(0.2)  # the last streams' records reach the server's log as they end
    truth = _timings(server_url)
    assert level.failed == 0 and level.completed >= STREAMS
    first, last = level.first_sent_unix_ns or 0, (level.last_sent_unix_ns or 0) + 5_000_000
    kept = [i for i, a in enumerate(truth["arrival_unix_ns"]) if first <= a <= last]
    # How far past its model deadline the server wrote (P99): its own measure of how much the host
    # let it down. On time, its write stamps are exact and the bounds are strict; on a host too
    # busy to carry 512 streams, a stamp and its write can be a scheduler slice apart, so the
    # truth is only that exact and the bound widens by it (printed, never skipped).
    late_p99 = float(np.percentile([x for i in kept for x in truth["late_ms"][i]], 99)) if kept else 0.0
    on_time = late_p99 <= LATE_OK_MS
    print(f"\nserver lateness P99 {late_p99:.2f} ms: {'on time' if on_time else 'host overloaded'}")
    if on_time:  # the server saw the measured requests (a few in flight at either edge aside)
        assert abs(len(kept) - level.completed) <= 0.1 * level.completed
    assert kept, "no request of the measured window reached the server's log"
    itl = [b - a for i in kept for a, b in itertools.pairwise(truth["chunks_ms"][i])]
    tpot = [truth["tpot_ms"][i] for i in kept]
    for name, values, bound in (("itl", itl, ITL_BOUND), ("tpot", tpot, TPOT_BOUND)):
        table = level.latency[name]
        for q, limit in zip((50, 99), bound, strict=True):
            reported = getattr(table, f"p{q}_ms")
            true = float(np.percentile(values, q))
            allowed = limit if on_time else limit + late_p99
            assert reported is not None and abs(reported - true) <= allowed, (
                name,
                q,
                reported,
                true,
                late_p99,
            )
