"""The GPU model server's tensor-parallel mode (measurements/gpu_model_server/server.py
--tensor-parallel 2) on a CPU (gloo): its output equals the unsplit model's (tp_reference.py,
written apart from the server), so the split is a real tensor parallelism and not two copies; the
uneven split gives one rank more of the model than the other; the endpoint streams the tokens asked
for; /metrics parses as mcp-bench reads it; --profile writes a trace per rank that mcp-bench reads;
merge_traces.py keeps the ranks' GPUs apart. The GPU side (NCCL, CUDA traces with nccl kernels)
needs a multi-GPU host: measurements/multi_gpu/run_x2.sh.

The servers need PyTorch (see conftest.py for the Python they run under; skipped, saying so, where
none has it). The split arithmetic and the plan's wire format need no PyTorch and always run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest

from mcp_bench.diagnose import DiagnoseInputs, diagnose, load_trace
from mcp_bench.diagnose.detectors.nccl_wait import trace_figures
from mcp_bench.diagnose.sources.trace import parse_trace
from mcp_bench.servermetrics.snapshot import Snapshot, parse_prometheus_text

REFERENCE = Path(__file__).with_name("tp_reference.py")
PROMPTS = ["the quick brown fox", "one two three four five six seven eight nine", "solo"]
MAX_TOKENS = 6
VOCAB = 512  # the preset "tp-tiny"
TP = [
    "--tensor-parallel",
    "2",
    "--device",
    "cpu",
    "--preset",
    "tp-tiny",
    "--threads",
    "1",
    "--max-batch",
    "4",
]


@pytest.fixture(scope="module")
def servers(serve: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two servers started side by side: uneven split with overlapped (cut) all-reduces, profiled;
    balanced split with serialised all-reduces."""
    prof = tmp_path_factory.mktemp("tp_profile")
    uneven, balanced = serve(
        [
            *TP,
            *("--split", "uneven", "--allreduce", "overlapped", "--overlap-min-rows", "2"),
            *("--profile", str(prof), "--profile-steps", "2"),
        ],
        [*TP, "--split", "balanced", "--allreduce", "serialised"],
    )
    return {"uneven": uneven, "balanced": balanced, "profile": prof}


@pytest.fixture(scope="module")
def reference(torch_python: str) -> dict[str, Any]:
    ids = [[zlib.crc32(w.encode()) % VOCAB for w in p.split()] for p in PROMPTS]
    out = subprocess.run(
        [torch_python, str(REFERENCE), "tp-tiny", str(MAX_TOKENS), json.dumps(ids)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    ref: dict[str, Any] = json.loads(out.stdout)
    return ref


async def _complete(session: aiohttp.ClientSession, url: str, prompt: str) -> dict[str, Any]:
    body = {"model": "tp-lm", "prompt": prompt, "max_tokens": MAX_TOKENS, "debug_hidden": True}
    async with session.post(url + "/v1/completions", json=body) as resp:
        assert resp.status == 200, await resp.text()
        out: dict[str, Any] = await resp.json()
        return out


async def _json(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as resp:
        assert resp.status == 200
        return await resp.json()


async def _metrics(session: aiohttp.ClientSession, url: str) -> dict[str, dict[str, float]]:
    async with session.get(url + "/metrics") as resp:
        text = await resp.text()
    snap = parse_prometheus_text(text, Snapshot.now(url, "prometheus_text"))  # as mcp-bench reads it
    return {
        name: {",".join(f"{k}={v}" for k, v in key): value for key, value in fam.values.items()}
        for name, fam in snap.families.items()
    }


@pytest.mark.parametrize("which", ["uneven", "balanced"])
async def test_split_model_equals_the_unsplit_one(
    servers: dict[str, Any], reference: dict[str, Any], which: str
) -> None:
    for ref in reference["prompts"]:  # a tie would make equal tokens prove little
        assert ref["margin"] > 1e-3, f"the reference's greedy choice is nearly a tie: {ref}"
    async with aiohttp.ClientSession() as s:
        # together, so they share prefill and decode steps (padding, slots, moves after release)
        answers = await asyncio.gather(*(_complete(s, servers[which], p) for p in PROMPTS))
    for prompt, got, ref in zip(PROMPTS, answers, reference["prompts"], strict=True):
        assert got["token_ids"] == ref["tokens"], prompt
        worst = max(abs(a - b) for a, b in zip(got["hidden"], ref["hidden"], strict=True))
        assert worst < 1e-4, f"{prompt!r}: hidden state off by {worst}"


async def test_uneven_split_gives_one_rank_more_of_the_model(servers: dict[str, Any]) -> None:
    async with aiohttp.ClientSession() as s:
        uneven = await _json(s, servers["uneven"] + "/debug/info")
        balanced = await _json(s, servers["balanced"] + "/debug/info")
        metrics = await _metrics(s, servers["uneven"])
    light, heavy = uneven["shards"]
    assert uneven["config"]["heads"] == light["heads"] + heavy["heads"]
    assert uneven["config"]["ff"] == light["ffn_columns"] + heavy["ffn_columns"]
    assert heavy["heads"] == 3 * light["heads"] and heavy["ffn_columns"] == 3 * light["ffn_columns"]
    assert heavy["parameters"] > 2 * light["parameters"]
    assert metrics["mcp_tp_rank_parameters"] == {
        "rank=0": light["parameters"],
        "rank=1": heavy["parameters"],
    }
    a, b = balanced["shards"]
    assert (a["heads"], a["ffn_columns"], a["parameters"]) == (b["heads"], b["ffn_columns"], b["parameters"])
    assert uneven["env"]["NCCL_NVLS_ENABLE"] == "0"


async def test_streams_the_tokens_asked_for(servers: dict[str, Any]) -> None:
    body = {
        "model": "tp-lm",
        "prompt": "stream me some tokens",
        "max_tokens": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with (
        aiohttp.ClientSession() as s,
        s.post(servers["balanced"] + "/v1/completions", json=body) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        text = (await resp.read()).decode()
    events = [e.removeprefix("data: ") for e in text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    tokens = [c for c in chunks if c["choices"]]
    assert len(tokens) == 7
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 6 + ["length"]
    assert chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}


async def test_metrics_parse_and_count_every_rank(servers: dict[str, Any]) -> None:
    async with aiohttp.ClientSession() as s:
        await _complete(s, servers["balanced"], "warm the counters")
        m = await _metrics(s, servers["balanced"])
    assert m["vllm:num_requests_running"] == {"model_name=tp-lm": 0.0}
    assert m["vllm:num_requests_waiting"] == {"model_name=tp-lm": 0.0}
    assert m["mcp_tp_world_size"] == {"": 2.0}
    assert m["vllm:generation_tokens_total"]["model_name=tp-lm"] >= MAX_TOKENS
    steps, coll, share = (
        m["mcp_tp_rank_step_seconds_total"],
        m["mcp_tp_rank_collective_seconds_total"],
        m["mcp_tp_rank_collective_share"],
    )
    assert set(steps) == set(coll) == set(share) == {"rank=0", "rank=1"}
    for r in steps:
        assert steps[r] > 0 and 0 < coll[r] <= steps[r]
        assert share[r] == pytest.approx(coll[r] / steps[r], rel=1e-6)


async def test_profile_writes_a_trace_per_rank(servers: dict[str, Any]) -> None:
    async with aiohttp.ClientSession() as s:  # the profiler starts at the first served step
        await asyncio.gather(*(_complete(s, servers["uneven"], p) for p in PROMPTS))
    prof: Path = servers["profile"]
    paths = [prof / f"tp_rank{r}.trace.json" for r in (0, 1)]
    deadline = time.monotonic() + 30
    while not all(p.exists() and p.stat().st_size for p in paths) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    for p in paths:
        trace = load_trace(p)
        steps = {sp.name for sp in trace.spans if sp.name.startswith("ProfilerStep#")}
        assert len(steps) == 2, steps
        assert not trace.kernels  # a CPU run: gloo collectives are CPU ops, not kernels
    # the detector reads it: no GPU kernels, so trap 5 has no data rather than a verdict
    (finding,) = [f for f in diagnose(DiagnoseInputs(trace=load_trace(paths[0]))) if f.trap == 5]
    assert finding.state == "NoData"


def test_merge_keeps_each_ranks_gpu_apart(merge_traces: ModuleType) -> None:
    """Two ranks that both call their GPU device 0 (as with CUDA_VISIBLE_DEVICES per rank): merged,
    trap 5 sees two devices, the light one waiting in its all-reduce."""

    def rank_trace(compute_us: float, t0: float) -> dict[str, Any]:
        ev = [{"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#5", "ts": t0, "dur": 200.0}]
        ev.append(
            {"ph": "X", "cat": "kernel", "name": "gemm", "ts": t0, "dur": compute_us, "pid": 0, "tid": 7}
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                "ts": t0 + compute_us,
                "dur": 200.0 - compute_us,
                "pid": 0,
                "tid": 9,
            }
        )
        for e in ev:
            e.setdefault("pid", 0)
        return {"traceEvents": ev}

    merged = merge_traces.merge([(0, rank_trace(50.0, 1000.0)), (1, rank_trace(190.0, 5000.0))])
    trace = parse_trace(merged)
    assert {k.track[0] for k in trace.kernels} == {"rank0:0", "rank1:0"}
    assert len(trace.steps()) == 2  # the step once per device
    fig = trace_figures(trace)
    assert fig is not None
    assert fig["collective_kernels"] == 2
    assert fig["comm_share"] == pytest.approx((150.0 + 10.0) / 400.0)


# --------------------------------------------------------------------------- without PyTorch


@pytest.mark.parametrize(
    ("total", "world", "mode", "expected"),
    [
        (64, 2, "balanced", [32, 32]),
        (64, 2, "uneven", [16, 48]),
        (28672, 2, "uneven", [7168, 21504]),
        (64, 4, "balanced", [16, 16, 16, 16]),
        (64, 4, "uneven", [11, 11, 10, 32]),
        (10, 3, "balanced", [4, 3, 3]),
        (4, 4, "uneven", [1, 1, 1, 1]),  # no room to be uneven: one each
        (16, 1, "uneven", [16]),
    ],
)
def test_split_sizes(gms: ModuleType, total: int, world: int, mode: str, expected: list[int]) -> None:
    sizes = gms.split_sizes(total, world, mode, 3.0)
    assert sizes == expected
    assert gms.offsets(sizes) == [sum(sizes[:i]) for i in range(world)]


def test_split_sizes_refuses_too_few_units(gms: ModuleType) -> None:
    with pytest.raises(ValueError, match="cannot split"):
        gms.split_sizes(3, 4, "balanced")


def test_plan_travels_whole(gms: ModuleType) -> None:
    """What rank 0 broadcasts (a header and a flat payload of integers) is the plan every rank runs."""
    plan = gms.Plan(
        moves=[(0, 3, 17), (1, 2, 5)],
        prefill=[[5, 6, 7], [8], [9, 10, 11, 12, 13]],
        first=2,
        decode_tokens=[40, 41],
        decode_positions=[17, 5],
        decode=True,
        profile=1,
    )
    header, payload = plan.encode()
    assert len(header) == gms.Plan.HEADER and header[-1] == len(payload)
    assert all(isinstance(x, int) for x in header + payload)
    assert gms.Plan.decode_from(header, payload) == plan
    stop = gms.Plan(stop=True)
    assert gms.Plan.decode_from(*stop.encode()) == stop
