"""The DCGM exporter as a server-metrics source: the serving GPUs, one entry per GPU per level.

A real HTTP server serves dcgm-exporter's exposition (its metric names, labels and units) with
values that move between scrapes, so the per-GPU figures can be checked against what was served.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from mcp_bench.cli_observers import server_metrics_probes
from mcp_bench.engines import run_plan
from mcp_bench.plan import RunPlan
from mcp_bench.results.serving import serving_cell, serving_gpus
from mcp_bench.servermetrics.dcgm import dcgm_gpus, memory_peak_pct
from mcp_bench.servermetrics.names import DCGM_METRICS
from mcp_bench.servermetrics.observer import ServerMetricsObserver
from mcp_bench.servermetrics.probes import dcgm_probe
from mcp_refserver import RefServerConfig, start_refserver

TOTAL_MIB = 143_771  # an H200's frame buffer as DCGM reports used + free


def _exposition(scrape: int, power: bool) -> str:
    """dcgm-exporter's layout: per family HELP and TYPE, then one sample per GPU."""
    values: dict[str, list[float]] = {name: [] for name in DCGM_METRICS}
    for gpu in (0, 1):
        used = 1000 + 5000 * gpu + 1000 * min(scrape, 9)
        values["DCGM_FI_DEV_GPU_UTIL"].append(10 * gpu + min(scrape, 9) * 10)  # climbs to 90 and 100
        values["DCGM_FI_DEV_FB_USED"].append(used)
        values["DCGM_FI_DEV_FB_FREE"].append(TOTAL_MIB - used)
        values["DCGM_FI_DEV_POWER_USAGE"].append(100.0 + scrape)
    lines = []
    for name, per_gpu in values.items():
        if name == "DCGM_FI_DEV_POWER_USAGE" and not power:
            continue
        lines += [f"# HELP {name} {name}.", f"# TYPE {name} gauge"]
        for gpu, value in enumerate(per_gpu):
            labels = f'gpu="{gpu}",UUID="GPU-{gpu:04d}",device="nvidia{gpu}",'
            labels += 'modelName="NVIDIA H200",Hostname="node-a"'
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


@pytest.fixture
async def exporter() -> AsyncIterator[tuple[str, dict[str, bool]]]:
    counter = itertools.count()
    settings = {"power": True}

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=_exposition(next(counter), settings["power"]), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/metrics", settings
    await runner.cleanup()


async def _run(url: str, requests: int = 40, power_served: bool = True) -> list[dict[str, object]]:
    cfg = RefServerConfig.model_validate({"ttft_ms": 5, "tpot_ms": 5, "default_max_tokens": 4})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "levels": {"concurrency": [2]},
                "stage": {"requests": requests},
            }
        )
        doc = await run_plan(plan, [ServerMetricsObserver([dcgm_probe(url)], timeline_interval_s=0.05)])
    delta = doc.levels[0].server_metrics["dcgm"]  # type: ignore[index]
    assert delta["status"] == "ok"
    assert delta["missing"] == ([] if power_served else ["DCGM_FI_DEV_POWER_USAGE"])  # reported missing
    gpus: list[dict[str, object]] = delta["gpus"]
    return gpus


async def test_each_serving_gpu_gets_its_utilisation_memory_and_power_over_the_level(
    exporter: tuple[str, dict[str, bool]],
) -> None:
    url, _ = exporter
    gpus = await _run(url)
    assert [(g["gpu"], g["uuid"], g["hostname"], g["role"]) for g in gpus] == [
        ("0", "GPU-0000", "node-a", "serving"),
        ("1", "GPU-0001", "node-a", "serving"),
    ]
    for gpu in gpus:
        sm, fb, power = gpu["sm_util_pct"], gpu["fb_used_mib"], gpu["power_w"]
        assert isinstance(sm, dict) and isinstance(fb, dict) and isinstance(power, dict)
        # sampled during the level (the timeline), not only the two snapshots around it
        assert sm["samples"] > 2
        assert sm["max"] > sm["mean"]
        assert fb["max"] >= fb["first"] and fb["max"] == max(fb["first"], fb["last"], fb["max"])
        assert gpu["fb_used_peak_pct"] == pytest.approx(100.0 * fb["max"] / TOTAL_MIB)
        assert power["max"] >= power["mean"] >= 100.0
    assert memory_peak_pct(gpus) == max(g["fb_used_peak_pct"] for g in gpus)  # type: ignore[type-var]


async def test_a_gauge_the_exporter_does_not_serve_is_left_out_not_zero(
    exporter: tuple[str, dict[str, bool]],
) -> None:
    url, settings = exporter
    settings["power"] = False
    gpus = await _run(url, requests=4, power_served=False)
    assert gpus and all("power_w" not in g for g in gpus)
    assert all("sm_util_pct" in g for g in gpus)


def test_dcgm_without_a_url_is_the_exporter_at_the_target_host_on_its_default_port() -> None:
    plan = RunPlan.from_dict(
        {"url": "http://10.0.0.7:8000/v1", "levels": {"concurrency": [1]}, "stage": {"requests": 1}}
    )
    (probe,) = server_metrics_probes(plan, ["dcgm"])
    assert probe.name == "dcgm" and probe.url == "http://10.0.0.7:9400/metrics"  # type: ignore[attr-defined]
    (given,) = server_metrics_probes(plan, ["dcgm=http://dcgm.gpu-operator.svc:9400/metrics"])
    assert given.url == "http://dcgm.gpu-operator.svc:9400/metrics"  # type: ignore[attr-defined]


def test_no_reading_is_no_gpu() -> None:
    assert dcgm_gpus({"status": "ok", "metrics": {}}) == []
    assert memory_peak_pct([]) is None


def test_the_table_cell_shows_the_serving_gpus_or_says_unavailable() -> None:
    gpus = [
        {"fb_used_peak_pct": 40.0, "sm_util_pct": {"mean": 80.0}, "power_w": {"mean": 300.0}},
        {"fb_used_peak_pct": 60.0, "sm_util_pct": {"mean": 60.0}, "power_w": {"mean": 500.0}},
    ]
    up = serving_gpus({"dcgm": {"status": "ok", "metrics": {"DCGM_FI_DEV_GPU_UTIL": {}}, "gpus": gpus}})
    assert serving_cell(up) == "mem 60.0% SM 70% 400 W"
    down = serving_gpus({"dcgm": {"status": "unavailable", "reason": "GET http://x:9400/metrics: refused"}})
    assert down is not None and serving_cell(down) == "unavailable"
    assert down.unavailable == ("dcgm: GET http://x:9400/metrics: refused",)
    assert serving_cell(None) == "-"
