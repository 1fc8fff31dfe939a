"""The operator's prober admits a round only once its worker processes have started: a worker
spawned for the round (seconds on a busy host: interpreter, imports) would otherwise spend the
check's own timeout before the first probe is sent."""

from __future__ import annotations

from mcp_checks.api import HealthProbeSpec, Verdict
from mcp_operator.readiness.prober import Prober
from mcp_refserver import RunningServer


async def test_a_slot_is_given_once_every_worker_has_started(refserver: RunningServer) -> None:
    prober = Prober(max_concurrent=2, per_target=2)
    try:
        assert prober.workers_started == 0  # nothing is spawned before the first round
        async with prober.slot(refserver.url):
            assert prober.workers_started == 2  # started while the round waited as queue time
            # 10 probes verify 90 %; the lag limit leaves a busy host's own lateness out of it
            url = f"{refserver.url}/health"
            spec = HealthProbeSpec(url, 10, 2, min_success_ratio=0.9, max_prober_lag_ms=1000)
            outcome = await prober.run_round(spec)
        assert outcome.outcome == Verdict.PASS, outcome
        async with prober.slot(refserver.url):  # the next round finds them running
            assert prober.workers_started == 2
    finally:
        prober.close()
    assert prober.workers_started == 0  # a closed prober starts afresh
