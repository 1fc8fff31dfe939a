"""PromQL through a real Prometheus server (Debian's package) scraping an exporter on loopback."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import Counter

from mcp_bench.records import ErrorKind
from mcp_bench.servermetrics import PrometheusQueryProbe, PromQuery

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="no prometheus binary (apt-get install prometheus)"
)
DEADLINE_S = 20.0


@pytest.fixture
def prometheus(tmp_path: Path, jobs_exporter: tuple[int, Counter], closed_port: int) -> Iterator[str]:
    port = closed_port  # free: Prometheus listens here
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: bench\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{jobs_exporter[0]}']\n"
    )
    if PROMETHEUS is None:
        pytest.skip("no prometheus binary on PATH (apt-get install prometheus)")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


async def _query(session: aiohttp.ClientSession, url: str, promql: str) -> list[dict[str, object]]:
    try:
        async with session.get(url + "/api/v1/query", params={"query": promql}) as r:
            if r.status != 200:
                return []
            body = await r.json()
            return list(body["data"]["result"])
    except aiohttp.ClientConnectionError:
        return []


async def _wait_for_scrape_after(url: str, instant_s: float) -> None:
    """Wait until Prometheus holds a sample of the target taken after ``instant_s`` (wall clock)."""
    deadline = time.monotonic() + DEADLINE_S
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            result = await _query(session, url, 'timestamp(jobs_total{job="bench"})')
            if result and float(result[0]["value"][1]) > instant_s:  # type: ignore[index]
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"Prometheus did not scrape the target within {DEADLINE_S} s")


async def test_counter_delta_through_promql(prometheus: str, jobs_exporter: tuple[int, Counter]) -> None:
    _, counter = jobs_exporter
    probe = PrometheusQueryProbe(
        prometheus,
        [
            PromQuery("jobs", 'jobs_total{job="bench"}', "counter"),
            PromQuery("target_up", 'up{job="bench"}', "gauge"),
            PromQuery("absent", 'no_such_metric{job="bench"}', "gauge"),
        ],
    )
    counter.inc(3)
    await _wait_for_scrape_after(prometheus, time.time())
    before = await probe.snapshot()
    counter.inc(7)
    await _wait_for_scrape_after(prometheus, time.time())
    after = await probe.snapshot()

    out = probe.delta(before, after)
    assert out["status"] == "ok", out
    jobs = out["metrics"]["jobs"]
    assert jobs["type"] == "counter"
    assert jobs["total_delta"] == 7.0
    assert jobs["series"][0]["labels"]["job"] == "bench"
    up = out["metrics"]["target_up"]["series"][0]
    assert (up["before"], up["after"]) == (1.0, 1.0)
    assert out["missing"] == ["absent"]  # an empty PromQL answer is missing, not zero


async def test_unreachable_prometheus_is_a_connect_error(closed_port: int) -> None:
    probe = PrometheusQueryProbe(f"http://127.0.0.1:{closed_port}", [PromQuery("up", "up")], timeout_s=2)
    snap = await probe.snapshot()
    assert snap.error_kind == ErrorKind.CONNECT
    assert probe.delta(snap, snap)["status"] == "unavailable"


def test_query_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="type must be"):
        PromQuery("x", "up", "histogram")
    with pytest.raises(ValueError, match="unique"):
        PrometheusQueryProbe("http://127.0.0.1:9", [PromQuery("x", "up"), PromQuery("x", "up")])
