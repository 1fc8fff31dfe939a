"""The GPU-only traps on small fixtures (hand-made, see fixtures/README.md): kernel fusion (1),
KV-cache L2 conflicts (2), precision breakpoint (4), NCCL wait (5), pipeline gap (7, trace part),
bank conflicts (9); and the parsers' handling of the real export formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.diagnose import (
    DiagnoseInputs,
    NcuFormatError,
    TraceFormatError,
    diagnose,
    load_ncu,
    load_trace,
    parse_ncu_csv,
    parse_trace,
)

FIX = Path(__file__).parent / "fixtures"


def state(trap: int, **inputs: Any) -> Any:
    return diagnose(DiagnoseInputs(**inputs))[trap]


def trace(name: str) -> Any:
    return load_trace(FIX / f"{name}.trace.json")


def ncu(name: str) -> Any:
    return load_ncu(FIX / f"{name}.ncu.csv")


def test_trap1_unfused_found_fused_not_found() -> None:
    f = state(1, trace=trace("unfused_decode"))
    assert f.state == "Found"
    assert f.values["kernels_per_step"] == 40 and f.values["tiny_share"] == 1.0
    assert f.values["gap_share"] == pytest.approx(0.6, abs=0.01)
    assert "unfused_decode" in f.source
    fused = state(1, trace=trace("fused_decode"))  # steps found through the launches' correlation ids
    assert fused.state == "NotFound" and fused.values["steps"] == 3 and fused.values["kernels_per_step"] == 4
    assert state(1).state == "NoData"


def test_trap2_l2_conflicts_against_a_baseline_and_alone() -> None:
    f = state(2, ncu=ncu("attention_conflicting"), ncu_baseline=ncu("attention_baseline"))
    assert f.state == "Found"
    assert f.values["l2_hit_pct"] == pytest.approx(31.52) and f.values[
        "baseline_l2_hit_pct"
    ] == pytest.approx(72.4)
    assert f.values["kernels"] == 1  # the GEMM is not an attention kernel
    assert f.values["sectors_per_request"] == pytest.approx(16.0)
    alone = state(2, ncu=ncu("attention_conflicting"))  # sector efficiency 38.1% < 50% floor
    assert alone.state == "Found" and "no baseline" in alone.summary
    assert state(2, ncu=ncu("attention_baseline"), ncu_baseline=ncu("attention_baseline")).state == "NotFound"
    assert state(2, ncu=ncu("attention_baseline")).state == "NotFound"
    # a hit rate alone, with no baseline and no sector efficiency, cannot be judged either way
    hits_only = parse_ncu_csv('"ID","Kernel Name","lts__t_sector_hit_rate.pct"\n"0","paged_attn","12.5"\n')
    f = state(2, ncu=hits_only)
    assert f.state == "NoData" and f.values["l2_hit_pct"] == 12.5 and "baseline" in f.needs
    assert state(2, ncu=ncu("bank_conflicts")).state == "NoData"  # no L2 figures in that report
    assert state(2).state == "NoData"


def test_trap4_layer_outliers(docs: Any) -> None:
    f = state(4, trace=trace("layers_int4_outlier"))
    assert f.state == "Found" and f.values["worst_layer"] == "model.layers.5" and f.values["outliers"] == 1
    assert f.values["z"] > 2.5
    assert state(4, trace=trace("layers_fp16")).state == "NotFound"
    assert state(4, trace=trace("fused_decode")).state == "NoData"  # no numbered layer spans
    # the other precision's run gives the throughput gain beside it
    fast, slow = docs.level(), docs.level()
    fast.throughput_rps, slow.throughput_rps = 150.0, 100.0
    g = state(
        4, trace=trace("layers_int4_outlier"), document=docs.document([fast]), compare=docs.document([slow])
    )
    assert g.values["throughput_gain"] == pytest.approx(1.5)
    assert state(4, document=docs.document([fast]), compare=docs.document([slow])).state == "NoData"


def test_trap5_exposed_collectives(docs: Any) -> None:
    f = state(5, trace=trace("tp_exposed_allreduce"))
    assert f.state == "Found" and f.values["collective_kernels"] == 6
    assert f.values["comm_share"] == pytest.approx(80 / 182, abs=0.01)
    assert f.values["exposed_comm_share"] == pytest.approx(80 / 182, abs=0.01)
    # the twin with the same all-reduce, overlapped by compute: as much traffic, no wait
    overlapped = state(5, trace=trace("tp_overlapped_allreduce"))
    assert overlapped.values["comm_share"] == pytest.approx(80 / 100, abs=0.01)
    assert overlapped.state == "NotFound" and overlapped.values["exposed_comm_share"] == 0.0
    assert state(5, trace=trace("fused_decode")).state == "NotFound"  # no collective at all
    assert state(5).state == "NoData"
    one_gpu = docs.document([docs.level(telemetry=docs.telemetry([docs.gpu(0, 50.0)]))])
    assert state(5, document=one_gpu).state == "NoData"  # needs several GPUs


def test_trap5_from_multi_gpu_telemetry(docs: Any) -> None:
    busy_link = [docs.gpu(i, 40.0, nvlink_tx_kib_s=4e6, nvlink_rx_kib_s=4e6) for i in range(4)]
    f = state(5, document=docs.document([docs.level(telemetry=docs.telemetry(busy_link))]))
    assert f.state == "Found" and f.values["gpus"] == 4 and f.values["nvlink_gbs"] > 1
    quiet = [docs.gpu(i, 97.0, nvlink_tx_kib_s=0.0, nvlink_rx_kib_s=0.0) for i in range(4)]
    assert state(5, document=docs.document([docs.level(telemetry=docs.telemetry(quiet))])).state == "NotFound"


def test_trap7_serial_copies_found_pipelined_not_found() -> None:
    f = state(7, trace=trace("serial_copy"))
    assert f.state == "Found" and f.values["overlapped"] == 0.0
    p = state(7, trace=trace("pipelined_copy"))
    assert p.state == "NotFound" and p.values["overlapped"] > 0.8


def test_trap9_bank_conflicts() -> None:
    f = state(9, ncu=ncu("bank_conflicts"), ncu_baseline=ncu("bank_conflicts_padded"))
    assert f.state == "Found"
    assert f.values["conflicts"] == 3_100_000 and f.values["wavefronts"] == 3_300_000
    assert f.values["baseline_ratio"] == 0.0
    assert state(9, ncu=ncu("bank_conflicts_padded")).state == "NotFound"
    assert state(9, ncu=ncu("attention_conflicting")).state == "NoData"
    assert state(9).state == "NoData"


def test_trace_formats() -> None:
    # a bare list of events and begin/end pairs
    events = [
        {"ph": "B", "name": "ProfilerStep#1", "cat": "gpu_user_annotation", "ts": 0, "pid": 0, "tid": 1},
        {"ph": "X", "name": "k", "cat": "kernel", "ts": 1, "dur": 2, "pid": 0, "tid": 1},
        {"ph": "E", "ts": 10, "pid": 0, "tid": 1},
    ]
    t = parse_trace(events)
    assert [(n, len(k)) for n, k in t.steps()] == [("ProfilerStep#1", 1)]
    with pytest.raises(TraceFormatError, match="traceEvents"):
        parse_trace({"events": []})
    with pytest.raises(TraceFormatError):
        parse_trace({"traceEvents": [{"ph": "X", "name": "k", "cat": "kernel"}]})


def test_trace_gz_and_bad_files(tmp_path: Path) -> None:
    import gzip

    data = (FIX / "serial_copy.trace.json").read_bytes()
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(data))
    assert len(load_trace(gz).copies) == 8
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceFormatError, match="not JSON"):
        load_trace(bad)
    assert json.loads(data)["traceEvents"]


def test_ncu_formats() -> None:
    with pytest.raises(NcuFormatError, match="ID"):
        parse_ncu_csv("kernel,metric\nx,1\n")
    raw = '"ID","Kernel Name","lts__t_sector_hit_rate.pct"\n"0","attn_fwd","n/a"\n"1","attn_fwd","55"\n'
    report = parse_ncu_csv(raw)
    assert [k.metrics for k in report.kernels] == [{}, {"lts__t_sector_hit_rate.pct": 55.0}]
    details = (
        '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'
        '"0","flash_fwd","Memory Workload Analysis","L2 Hit Rate","%","44.5"\n'
    )
    k = parse_ncu_csv(details).kernels[0]
    assert k.metrics == {"lts__t_sector_hit_rate.pct": 44.5} and k.units["lts__t_sector_hit_rate.pct"] == "%"
