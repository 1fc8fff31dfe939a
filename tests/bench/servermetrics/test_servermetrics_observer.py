"""Both observers inside a real run of the built-in engine against the reference server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_bench.engines import run_plan
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import LevelResult
from mcp_bench.servermetrics import ServerMetricsProbe, TritonStatsProbe, triton_probe, vllm_probe
from mcp_bench.servermetrics.observer import ServerMetricsObserver
from mcp_bench.telemetry.observer import TelemetryObserver
from mcp_refserver import RefServerConfig, start_refserver

REQUESTS = 20


async def test_levels_carry_server_deltas_and_telemetry(
    assert_server_counted_level: Callable[[LevelResult, str, str], int],
) -> None:
    cfg = RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1, "default_max_tokens": 3})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "payload": {"max_output_tokens": 3},
                "levels": {"concurrency": [2, 4]},
                "stage": {"requests": REQUESTS},
            }
        )
        probes: list[ServerMetricsProbe] = [
            triton_probe(srv.url),
            vllm_probe(srv.url),
            TritonStatsProbe(srv.url, cfg.model),
        ]
        telemetry = TelemetryObserver(0.1)
        doc = await run_plan(plan, [ServerMetricsObserver(probes), telemetry])

    assert len(doc.levels) == 2
    for level in doc.levels:
        assert level.failed == 0
        # Every request the engine sent in the level was counted by the server, and no more.
        assert_server_counted_level(level, cfg.model, cfg.model_version)
        # Telemetry: a GPU summary where NVML works, else unavailable with the reason, never zeros.
        assert isinstance(level.telemetry, dict)
        if telemetry.sampler.series.available:
            assert level.telemetry["gpus"]
        else:
            assert level.telemetry["status"] == "unavailable" and level.telemetry["reason"]
            assert "gpus" not in level.telemetry
    assert isinstance(doc.telemetry, dict) and doc.telemetry["status"] in {"ok", "unavailable"}


def test_probe_names_must_be_distinct() -> None:
    with pytest.raises(ValueError, match="distinct names"):
        ServerMetricsObserver([triton_probe("http://127.0.0.1:1"), triton_probe("http://127.0.0.1:2")])
