"""The detectors on traps produced on purpose on an NVIDIA H200 (measurements/gpu_traps/, see
fixtures/h200/README.md): each trap Found on its trap and NotFound on its fixed twin, from real
PyTorch profiler traces (1, 4, 7), Nsight Compute reports (2, 9) and benchmark runs against a
GPU model server (10, 12). The figures asserted are bounds the trap and the fix sit far apart on,
not the exact numbers of one run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_bench.diagnose import DiagnoseInputs, Finding, diagnose, load_ncu, load_trace
from mcp_bench.diagnose.detectors.precision_breakpoint import layer_spans
from mcp_bench.results.document import ResultDocument, loads_document

H200 = Path(__file__).parent / "fixtures" / "h200"


def trace(name: str) -> Any:
    return load_trace(H200 / f"{name}.trace.json.gz")


def ncu(name: str) -> Any:
    return load_ncu(H200 / f"{name}.ncu.csv")


def doc(name: str) -> ResultDocument:
    return loads_document((H200 / f"{name}.result.json").read_bytes())  # the CRC is checked


def trap(n: int, **inputs: Any) -> Finding:
    return diagnose(DiagnoseInputs(**inputs))[n]


def test_trap1_eager_decode_found_compiled_with_graphs_not_found() -> None:
    eager = trap(1, trace=trace("decode_eager"))
    assert eager.state == "Found", eager.summary
    assert eager.values["kernels_per_step"] > 250 and eager.values["tiny_share"] > 0.9
    assert eager.values["gap_share"] > 0.6
    # torch.compile fuses (half the kernels) but still launches each from the CPU: the gaps stay
    compiled = trap(1, trace=trace("decode_compiled"))
    assert compiled.state == "Found", compiled.summary
    assert compiled.values["kernels_per_step"] < eager.values["kernels_per_step"] * 0.6
    assert compiled.values["gap_share"] > 0.6
    # the same kernels replayed as a CUDA graph: no launch gaps, the fix the advice names
    graphs = trap(1, trace=trace("decode_compiled_graphs"))
    assert graphs.state == "NotFound", graphs.summary
    assert graphs.values["gap_share"] < 0.25 and graphs.values["tiny_share"] > 0.4
    assert graphs.values["steps"] == 2


def test_trap4_int4_layer_found_bf16_not_found() -> None:
    int4 = trap(4, trace=trace("layers_int4_layer5"))
    assert int4.state == "Found", int4.summary
    assert int4.values["worst_layer"] == "model.layers.5" and int4.values["outliers"] == 1
    assert int4.values["worst_us"] > 5 * int4.values["peers_us"]
    bf16 = trap(4, trace=trace("layers_bf16"))
    assert bf16.state == "NotFound", bf16.summary
    assert bf16.values["layers"] == 8 and bf16.values["z"] < 2.5


def test_trap4_reads_the_layers_as_the_gpu_ran_them() -> None:
    """The profiler writes each layer twice: the CPU range (the launches) and the GPU range."""
    t = trace("layers_int4_layer5")
    cats = {s.cat for s in t.spans if s.name.startswith("model.layers.")}
    assert cats == {"user_annotation", "gpu_user_annotation"}
    assert {s.cat for s in layer_spans(t)} == {"gpu_user_annotation"}


def test_trap4_cpu_ranges_alone_are_still_read() -> None:
    from mcp_bench.diagnose import parse_trace

    events = [
        {"ph": "X", "cat": "user_annotation", "name": f"model.layers.{i}", "ts": i * 100, "dur": 90, "pid": 1}
        for i in range(6)
    ]
    assert {s.cat for s in layer_spans(parse_trace(events))} == {"user_annotation"}


def test_trap4_a_slow_cpu_range_over_an_even_gpu_is_not_found() -> None:
    from mcp_bench.diagnose import parse_trace

    events = []
    for i in range(6):
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"model.layers.{i}", "ts": i * 1000, "pid": 1}
            | {"dur": 900 if i == 3 else 50}
        )
        events.append(
            {"ph": "X", "cat": "gpu_user_annotation", "name": f"model.layers.{i}", "ts": i * 100, "pid": 0}
            | {"dur": 100}
        )
    f = trap(4, trace=parse_trace(events))
    assert f.state == "NotFound", f.summary


def test_trap7_serial_pageable_copy_found_pipelined_not_found() -> None:
    serial = trap(7, trace=trace("copy_serial"))
    assert serial.state == "Found", serial.summary
    assert serial.values["exposed_copy_share"] > 0.5 and serial.values["overlapped"] == 0.0
    piped = trap(7, trace=trace("copy_pipelined"))
    assert piped.state == "NotFound", piped.summary
    assert piped.values["exposed_copy_share"] < 0.15 and piped.values["overlapped"] > 0.8
    assert len(load_trace(H200 / "copy_pipelined.trace.json.gz").copies) >= 6


def test_trap9_naive_transpose_found_padded_not_found() -> None:
    naive = trap(9, ncu=ncu("transpose_naive"), ncu_baseline=ncu("transpose_padded"))
    assert naive.state == "Found", naive.summary
    assert naive.values["ratio"] > 0.9 and naive.values["baseline_ratio"] < 0.1
    assert "transpose_smem<0>" in str(naive.values["kernel"])
    padded = trap(9, ncu=ncu("transpose_padded"))
    assert padded.state == "NotFound", padded.summary
    assert padded.values["wavefronts"] < naive.values["wavefronts"] / 10  # no replays


def test_trap2_interleaved_kv_layout_found_head_major_not_found() -> None:
    bad = trap(2, ncu=ncu("attn_interleaved"), ncu_baseline=ncu("attn_head_major"))
    assert bad.state == "Found", bad.summary
    # most of every sector fetched is wasted; the L2 hit rate *rose* (the heads' blocks share sectors)
    assert bad.values["sector_eff_drop_pct"] > 50 and bad.values["sector_efficiency_pct"] < 20
    assert bad.values["l2_hit_drop_pct"] < 0
    assert "sector efficiency" in bad.summary
    good = trap(2, ncu=ncu("attn_head_major"), ncu_baseline=ncu("attn_head_major"))
    assert good.state == "NotFound", good.summary
    # alone: a healthy decode kernel reads its cache once, so its L2 hit rate is low (3%); the
    # sector efficiency, not the hit rate, is what can be judged without a baseline
    alone = trap(2, ncu=ncu("attn_head_major"))
    assert alone.state == "NotFound", alone.summary
    assert alone.values["l2_hit_pct"] < 10 and alone.values["sector_efficiency_pct"] > 80
    assert trap(2, ncu=ncu("attn_interleaved")).state == "Found"
    assert trap(2, ncu=ncu("transpose_naive")).values["named_attention"] == 0.0


def test_trap12_compile_per_shape_found_warmed_buckets_not_found() -> None:
    shapes = trap(12, document=doc("compile_shapes"))
    assert shapes.state == "Found", shapes.summary
    assert shapes.values["shapes"] == 4 and shapes.values["slow_first_hits"] == 4
    assert shapes.values["compiles"] == 4 and shapes.values["first_hit_ms"] > 500
    buckets = trap(12, document=doc("compile_buckets"))
    assert buckets.state == "NotFound", buckets.summary
    assert buckets.values["shapes"] == 4 and buckets.values["compiles"] == 0
    assert buckets.values["slow_first_hits"] == 0


def test_trap12_a_warm_up_on_another_thread_leaves_first_hits() -> None:
    """The same buckets warmed on the main thread, not the one that serves: nothing compiles in
    the run, yet each shape's first request on the serving thread is still ~50 ms slow."""
    f = trap(12, document=doc("compile_buckets_main_thread"))
    assert f.state == "Found", f.summary
    assert f.values["compiles"] == 0 and f.values["slow_first_hits"] == 4
    assert f.values["first_hit_ms"] > 5 * f.values["warm_p50_ms"]


def test_trap10_uneven_instances_found_even_not_found() -> None:
    uneven = trap(10, document=doc("instances_8_1"))
    assert uneven.state == "Found", uneven.summary
    assert uneven.values["instances"] == 2 and uneven.values["starving"] == "instance 1"
    assert uneven.values["max_share"] > 0.5 and uneven.values["min_share"] < 0.15
    even = trap(10, document=doc("instances_1_1"))
    assert even.state == "NotFound", even.summary
    assert even.values["min_max_ratio"] > 0.8 and even.values["jain_index"] > 0.95


@pytest.mark.parametrize("name", ["decode_eager", "layers_bf16", "copy_serial"])
def test_real_traces_need_no_other_input(name: str) -> None:
    """A detector given only a trace says NoData for the traps a trace cannot show."""
    findings = {f.trap: f for f in diagnose(DiagnoseInputs(trace=trace(name)))}
    assert findings[3].state == "NoData" and findings[12].state == "NoData"
