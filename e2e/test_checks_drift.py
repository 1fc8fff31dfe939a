"""Recording-rule drift against a real Prometheus (Debian's package) started on loopback,
scraping a real prometheus_client exporter in this process whose values the test moves while
the check runs."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from mcp_checks.drift import MetricDriftSpec, RecordingRule, run_metric_drift
from mcp_checks.verdict import Verdict

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
pytestmark = pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="no prometheus binary")

RULES = """\
groups:
  - name: drift
    interval: 1s
    rules:
      - record: job:requests:rate_sum
        expr: sum by (job, route) (requests_total)
      - record: model:queue_depth:sum
        expr: sum by (model) (queue_depth)
      - record: job:requests:skewed
        expr: sum by (job, route) (requests_total) * 1.01
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def exporter() -> Iterator[int]:
    """A counter per route that keeps moving (a drift check must hold while values change)
    and a gauge with two label sets."""
    registry = CollectorRegistry()
    requests = Counter("requests", "requests served", ["route"], registry=registry)
    depth = Gauge("queue_depth", "queued requests", ["model"], registry=registry)
    depth.labels(model="llama").set(40)
    depth.labels(model="mistral").set(0)  # a zero value must compare, not divide by zero
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.05):
            requests.labels(route="/v1/chat").inc(3)
            requests.labels(route="/v1/embed").inc(1)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    server, server_thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield server.server_port
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        server_thread.join(timeout=5)


def _query(url: str, promql: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5
    ) as r:
        result: list[dict[str, object]] = json.load(r)["data"]["result"]
    return result


@pytest.fixture(scope="module")
def prometheus(exporter: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("prometheus")
    (work / "rules.yml").write_text(RULES)
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - rules.yml\n"
        "scrape_configs:\n  - job_name: inference\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter}']\n"
    )
    port = _free_port()
    log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if all(
                    _query(url, r)
                    for r in ("job:requests:rate_sum", "job:requests:skewed", "model:queue_depth:sum")
                ):
                    break
            except OSError:
                pass
            assert proc.poll() is None, (work / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the recording rules produced no series within 60 s"
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


async def test_correct_rules_pass_with_expressions_read_from_the_rules_api(prometheus: str) -> None:
    spec = MetricDriftSpec(
        prometheus,
        (RecordingRule("job:requests:rate_sum"), RecordingRule("model:queue_depth:sum")),
        window_s=4,
        points=3,
    )
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.PASS, "MetricDriftWithinThreshold"), out
    assert out.observed["job:requests:rate_sum.series"] == "2"  # two routes
    assert out.observed["model:queue_depth:sum.series"] == "2"  # the zero-valued model compares too
    assert out.observed["job:requests:rate_sum.maxDrift"] == "0.0000%"
    assert out.source == prometheus and out.thresholds["maxRelativeDrift"] == "< 0.3000%"


async def test_rule_whose_expression_differs_from_the_raw_query_fails_with_the_figure(
    prometheus: str,
) -> None:
    raw = "sum by (job, route) (requests_total)"  # what the skewed rule should have recorded
    spec = MetricDriftSpec(prometheus, (RecordingRule("job:requests:skewed", expr=raw),))
    out = await run_metric_drift(spec)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out
    assert "drift 1.0000% >= 0.3000%" in out.message
    assert 'job:requests:skewed{job="inference",route=' in out.message
    assert {f.reason for f in out.findings} == {"DriftAboveThreshold"}
    assert len(out.findings) == 2 and all("drift=1.0000%" in f.observed for f in out.findings)


async def test_warn_band_and_unknown_rule_against_real_prometheus(prometheus: str) -> None:
    raw = "sum by (job, route) (requests_total)"
    warn = await run_metric_drift(
        MetricDriftSpec(
            prometheus,
            (RecordingRule("job:requests:skewed", expr=raw),),
            threshold=0.02,
            warn_threshold=0.005,
        )
    )
    assert (warn.outcome, warn.reason) == (Verdict.WARN, "MetricDriftInWarnBand"), warn
    missing = await run_metric_drift(MetricDriftSpec(prometheus, (RecordingRule("job:nope"),)))
    assert (missing.outcome, missing.reason) == (Verdict.INCONCLUSIVE, "RecordingRuleNotFound")
    assert "job:nope" in missing.message
