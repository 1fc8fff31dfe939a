"""``mcp-bench run`` observer flags: probes built from the flags, and a CLI run against the reference
server (in a background thread, since the CLI runs its own event loop) with per-level deltas."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from mcp_bench.cli import main
from mcp_bench.cli_observers import ObserverArgError, build_observers, server_metrics_probes
from mcp_bench.plan import RunPlan
from mcp_bench.results import loads_document
from mcp_bench.results.document import LevelResult
from mcp_bench.servermetrics import PrometheusEndpointProbe, PrometheusQueryProbe, TritonStatsProbe
from mcp_bench.servermetrics.observer import ServerMetricsObserver
from mcp_bench.telemetry.observer import TelemetryObserver
from mcp_refserver import RefServerConfig, RunningServer

CFG = RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1, "default_max_tokens": 3})


@pytest.fixture(scope="module")
def refserver_thread(
    refserver_in_thread: Callable[..., AbstractContextManager[RunningServer]],
) -> Iterator[RunningServer]:
    with refserver_in_thread(CFG) as srv:
        yield srv


def _plan(url: str = "http://10.0.0.5:8000/v1", backend: str = "http") -> RunPlan:
    return RunPlan.from_dict(
        {"url": url, "backend": backend, "levels": {"concurrency": [1]}, "stage": {"requests": 1}}
    )


def test_flags_build_the_matching_probes() -> None:
    probes = server_metrics_probes(
        _plan(),
        ["triton", "vllm=http://10.0.0.5:9000", "http://exporter:9100/metrics"],
        "http://prom:9090",
        ["queue=sum(nv_inference_queue_duration_us)", "vllm:ok:counter=sum(vllm:request_success_total)"],
        ["resnet", "bert=http://10.0.0.6:8000"],
    )
    assert [p.name for p in probes] == [
        "triton-metrics",
        "vllm-metrics",
        "http://exporter:9100/metrics",
        "prometheus:http://prom:9090",
        "triton-stats:resnet",
        "triton-stats:bert",
    ]
    triton, vllm, exporter, prom, resnet, bert = probes
    assert isinstance(triton, PrometheusEndpointProbe) and triton.url == "http://10.0.0.5:8000/metrics"
    assert isinstance(vllm, PrometheusEndpointProbe) and vllm.url == "http://10.0.0.5:9000/metrics"
    assert isinstance(exporter, PrometheusEndpointProbe) and exporter.url == "http://exporter:9100/metrics"
    assert isinstance(prom, PrometheusQueryProbe)
    assert [(q.name, q.type) for q in prom.queries] == [("queue", "gauge"), ("vllm:ok", "counter")]
    assert (
        isinstance(resnet, TritonStatsProbe) and resnet.url == "http://10.0.0.5:8000/v2/models/resnet/stats"
    )
    assert isinstance(bert, TritonStatsProbe) and bert.url == "http://10.0.0.6:8000/v2/models/bert/stats"
    # A gRPC target (host:port) still has its metrics on HTTP.
    (grpc_triton,) = server_metrics_probes(_plan("10.0.0.7:8001", "triton-grpc"), ["triton"])
    assert isinstance(grpc_triton, PrometheusEndpointProbe)
    assert grpc_triton.url == "http://10.0.0.7:8001/metrics"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"promql": ["a=up"]}, "--promql needs --prometheus"),
        ({"prometheus": "http://prom:9090"}, "needs at least one --promql"),
        ({"prometheus": "http://prom:9090", "promql": ["no-equals"]}, "NAME=VALUE"),
        ({"prometheus": "http://prom:9090", "promql": ["a=up", "a=down"]}, "unique"),
        ({"server_metrics": ["ftp://x/metrics"]}, "not an http"),
        ({"server_metrics": ["triton", "triton"]}, "given twice: triton-metrics"),
        ({"triton_stats": ["=http://x"]}, "MODEL or MODEL=URL"),
    ],
)
def test_bad_observer_flags_are_clear(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ObserverArgError, match=message):
        server_metrics_probes(_plan(), **kwargs)  # type: ignore[arg-type]


def test_build_observers_checks_the_gpu_interval() -> None:
    observers = build_observers(_plan(), 0.1, ["vllm"])
    assert [type(o) for o in observers] == [TelemetryObserver, ServerMetricsObserver]
    assert build_observers(_plan()) == []
    with pytest.raises(ObserverArgError, match="--gpu-telemetry"):
        build_observers(_plan(), 0.001)


def test_cli_run_puts_per_level_server_deltas_in_the_result(
    refserver_thread: RunningServer,
    tmp_path: Path,
    assert_server_counted_level: Callable[[LevelResult, str, str], int],
) -> None:
    out = tmp_path / "r.json"
    argv = [
        "run", "-q", "--url", refserver_thread.url, "--backend", "openai", "--model", CFG.model,
        "--max-tokens", "3", "--concurrency", "1,2", "--requests", "12",
        "--server-metrics", "triton", "--server-metrics", "vllm", "--triton-stats", CFG.model,
        "--gpu-telemetry", "50ms", "--output", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    doc = loads_document(out.read_text())
    assert len(doc.levels) == 2
    for level in doc.levels:
        metrics = level.server_metrics
        assert metrics is not None
        assert set(metrics) == {"triton-metrics", "vllm-metrics", f"triton-stats:{CFG.model}"}
        # The server counted exactly this level's requests: a per-level delta, not a running total.
        assert assert_server_counted_level(level, CFG.model, CFG.model_version) == 12
        # GPU telemetry was asked for: a summary where NVML works, else unavailable with the reason.
        assert isinstance(level.telemetry, dict)
        assert level.telemetry["status"] in {"ok", "unavailable"}
        if level.telemetry["status"] == "unavailable":
            assert level.telemetry["reason"] and "gpus" not in level.telemetry
    assert isinstance(doc.telemetry, dict) and doc.telemetry["status"] in {"ok", "unavailable"}


def test_cli_rejects_bad_observer_flags_before_traffic(closed_port: int, capsys) -> None:  # type: ignore[no-untyped-def]
    # Against a closed port a run that went ahead would exit 3 (nothing measured), not 2.
    argv = ["run", "-q", "--url", f"http://127.0.0.1:{closed_port}/", "--concurrency", "1", "--requests", "1"]
    assert main([*argv, "--promql", "x=up"]) == 2
    assert "--promql needs --prometheus" in capsys.readouterr().err
    assert main([*argv, "--gpu-telemetry", "1ms"]) == 2
    assert "--gpu-telemetry" in capsys.readouterr().err
    assert main([*argv, "--k6-binary", "/bin/true"]) == 2
    assert "--k6-binary is for the k6 engine" in capsys.readouterr().err
