"""Detectors that read the result document: screening (+), false wait (3), paged fragmentation
(6), pipeline gap from telemetry (7), priority amplification (8), instance starvation (10),
serialisation (11), recompile avalanche (12); Found, NotFound and NoData for each."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.diagnose import DiagnoseInputs, diagnose
from mcp_bench.diagnose.detectors.paged_fragmentation import assess_vllm


def finding(trap: int, doc: Any = None, **inputs: Any) -> Any:
    return diagnose(DiagnoseInputs(document=doc, **inputs))[trap]


# -- screening -------------------------------------------------------------------------------
def test_screening(docs: Any) -> None:
    compute = docs.telemetry([docs.gpu(0, 98.0, nvlink_tx_kib_s=1e5, nvlink_rx_kib_s=1e5, pcie_tx_kb_s=1e5)])
    f = finding(0, docs.document([docs.level(telemetry=compute)]))
    assert f.state == "Found" and f.values["bound"] == "compute" and f.level == "c=1"
    transfer = docs.telemetry([docs.gpu(0, 60.0, pcie_rx_kb_s=25e6, pcie_tx_kb_s=1e6)])
    t = finding(0, docs.document([docs.level(telemetry=transfer)]))
    assert (
        t.state == "Found" and t.values["bound"] == "transfer" and t.values["pcie_gbs"] == pytest.approx(25.0)
    )
    neither = docs.telemetry([docs.gpu(0, 50.0, pcie_rx_kb_s=1e6)])
    assert finding(0, docs.document([docs.level(telemetry=neither)])).state == "NotFound"
    # NVLink saturated: a busy GPU that waits on its links is not "compute bound"
    linked = docs.telemetry([docs.gpu(0, 98.0, nvlink_tx_kib_s=2e7, nvlink_rx_kib_s=2e7)])
    assert finding(0, docs.document([docs.level(telemetry=linked)])).values["bound"] == "neither"
    assert finding(0, docs.document([docs.level()])).state == "NoData"  # telemetry unavailable


# -- trap 3 ----------------------------------------------------------------------------------
def test_false_wait_found_at_low_load(docs: Any) -> None:
    # 100 requests in 10 s, each queued 4 ms for a batch that never fills, 1 ms of compute
    stats = docs.triton_delta(docs.triton_body(100, queue_ms=4.0, infer_ms=1.0))
    f = finding(3, docs.document([docs.level(server_metrics={"triton-stats:m": stats})]))
    assert f.state == "Found"
    assert f.values["queue_ms"] == pytest.approx(4.0) and f.values["queue_share"] == pytest.approx(0.8)
    assert f.values["busy_share"] == pytest.approx(0.01) and f.values["false_wait_ms"] == pytest.approx(4.0)
    assert f.source.startswith("triton-stats:m")


def test_saturation_queue_is_not_false_wait(docs: Any) -> None:
    # 9000 requests in 10 s at 1 ms each: the model is busy 90% of the time, the queue is real
    stats = docs.triton_delta(docs.triton_body(9000, queue_ms=8.0, infer_ms=1.0))
    f = finding(3, docs.document([docs.level(server_metrics={"triton-stats:m": stats})]))
    assert f.state == "NotFound" and f.values["busy_share"] == pytest.approx(0.9)


def test_batches_that_fill_are_not_false_wait(docs: Any) -> None:
    # batched 8 to one execution: little queue relative to the request
    stats = docs.triton_delta(docs.triton_body(800, queue_ms=0.2, infer_ms=2.0, executions=100))
    f = finding(3, docs.document([docs.level(server_metrics={"triton-stats:m": stats})]))
    assert f.state == "NotFound" and f.values["batch_size"] == 8.0


def test_false_wait_from_triton_metrics_counters(docs: Any, labels: Any) -> None:
    m = labels(model="m", version="1")
    before = {
        n: ("counter", {m: 0.0}) for n in ("nv_inference_request_success", "nv_inference_queue_duration_us")
    }
    after = {
        "nv_inference_request_success": ("counter", {m: 50.0}),
        "nv_inference_queue_duration_us": ("counter", {m: 50 * 6000.0}),
        "nv_inference_compute_infer_duration_us": ("counter", {m: 50 * 500.0}),
        "nv_inference_request_duration_us": ("counter", {m: 50 * 6600.0}),
    }
    before.update({n: ("counter", {m: 0.0}) for n in after})
    delta = docs.prom_delta(before, after)
    assert finding(3, docs.document([docs.level(server_metrics={"triton-metrics": delta})])).state == "Found"


def test_false_wait_no_data(docs: Any) -> None:
    f = finding(3, docs.document([docs.level()]))
    assert f.state == "NoData" and "--triton-stats" in f.needs
    unavailable = {"triton-stats:m": {"status": "unavailable", "reason": "connect"}}
    assert finding(3, docs.document([docs.level(server_metrics=unavailable)])).state == "NoData"


# -- trap 6 ----------------------------------------------------------------------------------
def _vllm(preempt: list[float], usage: list[float], docs: Any, labels: Any) -> dict[str, Any]:
    k = labels(model_name="m")
    points = [
        {"vllm:num_preemptions_total": ("counter", {k: p}), "vllm:kv_cache_usage_perc": ("gauge", {k: u})}
        for p, u in zip(preempt, usage, strict=True)
    ]
    return docs.prom_delta(points[0], points[-1], samples=points[1:-1])


def test_preemptions_at_low_usage_are_fragmentation(docs: Any, labels: Any) -> None:
    delta = _vllm([0, 0, 2, 5, 5], [0.0, 0.4, 0.55, 0.58, 0.0], docs, labels)
    a = assess_vllm(delta)
    assert a is not None and a["state"] == "Found"
    assert a["preemptions"] == 5 and a["usage_at_preemption"] == pytest.approx(0.58)
    f = finding(6, docs.document([docs.level(server_metrics={"vllm-metrics": delta})]))
    assert f.state == "Found" and f.values["usage_at_preemption"] == pytest.approx(0.58)
    assert "58%" in f.summary


def test_preemptions_at_full_cache_are_pressure_not_fragmentation(docs: Any, labels: Any) -> None:
    delta = _vllm([0, 1, 4, 4], [0.0, 0.97, 0.99, 0.1], docs, labels)
    f = finding(6, docs.document([docs.level(server_metrics={"vllm-metrics": delta})]))
    assert f.state == "NotFound" and "pressure" in f.summary


def test_full_cache_seen_just_after_the_rise_is_pressure(docs: Any, labels: Any) -> None:
    """A preemption between a filling sample and a full one: the cache was full when it happened."""
    delta = _vllm([0, 0, 3, 3, 3], [0.0, 0.5, 0.6, 0.96, 0.2], docs, labels)
    a = assess_vllm(delta)
    assert a is not None and a["state"] == "NotFound" and a["usage_at_preemption"] == pytest.approx(0.96)


def test_no_preemption_is_not_found_and_no_vllm_is_no_data(docs: Any, labels: Any) -> None:
    delta = _vllm([3, 3, 3], [0.2, 0.5, 0.1], docs, labels)
    f = finding(6, docs.document([docs.level(server_metrics={"v": delta})]))
    # without the tokens held to weigh the usage against, fragmentation without preemption is not
    # judged, and the summary says so
    assert f.state == "NotFound" and "fragmentation without preemption not judged" in f.summary
    assert finding(6, docs.document([docs.level()])).state == "NoData"


def test_preemptions_without_in_level_samples_are_no_data(docs: Any, labels: Any) -> None:
    k = labels(model_name="m")
    delta = docs.prom_delta(
        {
            "vllm:num_preemptions_total": ("counter", {k: 0.0}),
            "vllm:kv_cache_usage_perc": ("gauge", {k: 0.0}),
        },
        {
            "vllm:num_preemptions_total": ("counter", {k: 7.0}),
            "vllm:kv_cache_usage_perc": ("gauge", {k: 0.0}),
        },
    )
    f = finding(6, docs.document([docs.level(server_metrics={"v": delta})]))
    assert f.state == "NoData" and f.values["preemptions"] == 7 and "sampled during the level" in f.needs


def test_usage_read_with_no_request_in_the_server_is_no_evidence(docs: Any, labels: Any) -> None:
    """A starved sampler read the cache before the load and after it (0 % used, nothing running):
    those readings saw none of the preemptions, so they are no sign of fragmentation (seen on a
    busy host with a real vLLM: 6 preemptions, two samples, both idle). The same readings taken
    while requests ran are the fragmentation they look like."""
    k = labels(model_name="m")

    def point(p: float, u: float, running: float) -> dict[str, Any]:
        return {
            "vllm:num_preemptions_total": ("counter", {k: p}),
            "vllm:kv_cache_usage_perc": ("gauge", {k: u}),
            "vllm:num_requests_running": ("gauge", {k: running}),
        }

    idle = [point(0, 0.0, 0), point(0, 0.0, 0), point(6, 0.0, 0), point(6, 0.0, 0)]
    a = assess_vllm(docs.prom_delta(idle[0], idle[-1], samples=idle[1:-1]))
    assert a is not None and a["state"] == "NoData" and a["usage_at_preemption"] is None, a
    f = finding(
        6,
        docs.document(
            [docs.level(server_metrics={"v": docs.prom_delta(idle[0], idle[-1], samples=idle[1:-1])})]
        ),
    )
    assert f.state == "NoData" and "while requests were in the server" in f.summary
    busy = [point(0, 0.0, 0), point(0, 0.3, 4), point(6, 0.35, 4), point(6, 0.0, 0)]
    b = assess_vllm(docs.prom_delta(busy[0], busy[-1], samples=busy[1:-1]))
    assert b is not None and b["state"] == "Found" and b["usage_at_preemption"] == pytest.approx(0.35), b


def test_usage_against_tokens_held(docs: Any, labels: Any) -> None:
    k = labels(model_name="m")
    info = {labels(model_name="m", block_size="16", num_gpu_blocks="100"): 1.0}

    def point(p: float, u: float, running: float, n: float) -> dict[str, Any]:
        return {
            "vllm:num_preemptions_total": ("counter", {k: p}),
            "vllm:kv_cache_usage_perc": ("gauge", {k: u}),
            "vllm:num_requests_running": ("gauge", {k: running}),
            "vllm:cache_config_info": ("gauge", info),
        }

    points = [point(0, 0.0, 0, 0), point(0, 0.9, 4, 0), point(0, 0.9, 4, 0), point(0, 0.0, 0, 0)]
    delta = docs.prom_delta(points[0], points[-1], samples=points[1:-1])
    hist = {"count": 10.0, "sum": 1000.0, "mean": 100.0, "status": "ok"}
    for name in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        delta["metrics"][name] = {"type": "histogram", "status": "ok", "series": [{"labels": {}, **hist}]}
    a = assess_vllm(delta)
    # 4 running requests x (100 prompt + 50 generated so far) = 600 tokens of 1600: 0.375 expected, 0.9 seen
    assert a is not None and a["usage_over_held"] == pytest.approx(0.9 / 0.375)
    assert a["state"] == "Found"
    # the same ratio with preemptions at a 90% full cache: the running requests are then the longest
    # ones, so the held estimate runs low and the ratio high; the usage at preemption decides
    points[2]["vllm:num_preemptions_total"] = ("counter", {k: 2.0})
    points[3]["vllm:num_preemptions_total"] = ("counter", {k: 2.0})
    pressed = docs.prom_delta(points[0], points[-1], samples=points[1:-1])
    pressed["metrics"].update(
        {n: delta["metrics"][n] for n in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens")}
    )
    b = assess_vllm(pressed)
    assert b is not None and b["usage_over_held"] == pytest.approx(0.9 / 0.375) and b["state"] == "NotFound"


# -- trap 7 (telemetry) ----------------------------------------------------------------------
def _idle_gpu(docs: Any, share: float) -> dict[str, Any]:
    gpu = docs.gpu(0, 40.0)
    gpu["sm_idle"] = {"status": "ok", "below_pct": 10.0, "share": share, "gaps": 12, "longest_ms": 35.0}
    return gpu


def test_pipeline_gap_from_telemetry_and_queue(docs: Any, labels: Any) -> None:
    k = labels(model_name="m")
    waiting = [{"vllm:num_requests_waiting": ("gauge", {k: v})} for v in (0, 3, 5, 0)]
    queue = docs.prom_delta(waiting[0], waiting[-1], samples=waiting[1:-1])
    level = docs.level(
        server_metrics={"vllm-metrics": queue}, telemetry=docs.telemetry([_idle_gpu(docs, 0.35)])
    )
    f = finding(7, docs.document([level]))
    assert f.state == "Found" and f.values["queue_non_empty"] == "yes" and f.values["sm_idle_share"] == 0.35
    idle_but_no_queue = [{"vllm:num_requests_waiting": ("gauge", {k: 0.0})} for _ in range(4)]
    quiet = docs.prom_delta(idle_but_no_queue[0], idle_but_no_queue[-1], samples=idle_but_no_queue[1:-1])
    level = docs.level(server_metrics={"v": quiet}, telemetry=docs.telemetry([_idle_gpu(docs, 0.35)]))
    assert finding(7, docs.document([level])).state == "NotFound"  # idle because there was no work
    busy = docs.level(
        server_metrics={"vllm-metrics": queue}, telemetry=docs.telemetry([_idle_gpu(docs, 0.02)])
    )
    assert finding(7, docs.document([busy])).state == "NotFound"
    no_queue_data = docs.level(telemetry=docs.telemetry([_idle_gpu(docs, 0.35)]))
    assert finding(7, docs.document([no_queue_data])).state == "NoData"


# -- trap 8 ----------------------------------------------------------------------------------
def _classed(
    docs: Any, light: dict[str, list[float]], heavy: dict[str, list[float]], slo: float | None
) -> Any:
    plan = docs.plan(
        payload={
            "classes": [
                {"name": "interactive", "weight": 1, "priority": 0},
                {"name": "batch", "weight": 1, "priority": 10},
            ]
        },
        slo={"latency_p99_ms": slo} if slo else {},
    )
    levels = []
    for i, (conc, lat) in enumerate(((1, light), (16, heavy))):
        recs = [r for name, ms in lat.items() for r in docs.records({"class": name}, ms)]
        levels.append(docs.level(i, conc, records=recs, plan=plan))
    return docs.document(levels, plan)


def test_priority_amplification_the_guides_case(docs: Any) -> None:
    doc = _classed(
        docs,
        {"interactive": [100.0] * 50, "batch": [120.0] * 50},
        {"interactive": [150.0] * 50, "batch": [890.0] * 50},
        500.0,
    )
    f = finding(8, doc)
    assert f.state == "Found" and f.level == "c=16"
    assert f.values["low_p99_ms"] == pytest.approx(890, rel=0.01)
    assert f.values["low_uncontended_p99_ms"] == pytest.approx(120, rel=0.01)
    assert f.values["amplification"] == pytest.approx(890 / 120, rel=0.02)
    assert f.values["low_slo_ms"] == 500.0


def test_fifo_slows_both_classes_alike_not_found(docs: Any) -> None:
    doc = _classed(
        docs,
        {"interactive": [100.0] * 50, "batch": [120.0] * 50},
        {"interactive": [700.0] * 50, "batch": [720.0] * 50},
        500.0,
    )
    assert finding(8, doc).state == "NotFound"  # the high class misses its SLO too: no priority effect


def test_priority_amplification_without_slo(docs: Any) -> None:
    light = {"interactive": [10.0] * 50, "batch": [10.0] * 50}
    assert (
        finding(8, _classed(docs, light, {"interactive": [12.0] * 50, "batch": [90.0] * 50}, None)).state
        == "Found"
    )
    assert (
        finding(8, _classed(docs, light, {"interactive": [12.0] * 50, "batch": [14.0] * 50}, None)).state
        == "NotFound"
    )


def test_priority_amplification_is_judged_past_a_noisy_uncontended_p99(docs: Any) -> None:
    """Three slow requests in the light level (a busy host) made batch's uncontended P99 26 ms beside
    interactive's 18: the classes cost the same uncontended (their P50s), so the 2.4x between
    them at the heavy level is the priority's (a run under a CPU hog once read it NotFound)."""
    light = {"interactive": [18.0] * 100, "batch": [18.0] * 97 + [26.0] * 3}
    strict = {"interactive": [60.0] * 98 + [105.0] * 2, "batch": [150.0] * 98 + [255.0] * 2}
    f = finding(8, _classed(docs, light, strict, 120.0))
    assert f.state == "Found", (f.summary, f.values)
    fifo = {"interactive": [60.0] * 98 + [105.0] * 2, "batch": [62.0] * 98 + [118.0] * 2}
    assert finding(8, _classed(docs, light, fifo, 120.0)).state == "NotFound"


def test_priority_needs_classes(docs: Any) -> None:
    f = finding(8, docs.document([docs.level()]))
    assert f.state == "NoData" and "classes" in f.needs


# -- trap 10 ---------------------------------------------------------------------------------
def _busy(docs: Any, labels: Any, seconds: list[float]) -> dict[str, Any]:
    name = "mcp_refserver_instance_busy_seconds_total"
    before = {name: ("counter", {labels(instance=str(i)): 0.0 for i in range(len(seconds))})}
    after = {name: ("counter", {labels(instance=str(i)): s for i, s in enumerate(seconds)})}
    return docs.prom_delta(before, after, seconds=10.0)


def test_instance_starvation_from_busy_counters(docs: Any, labels: Any) -> None:
    f = finding(
        10, docs.document([docs.level(server_metrics={"m": _busy(docs, labels, [9.5, 1.0, 0.8, 1.2])})])
    )
    assert f.state == "Found" and f.values["max_share"] == 0.95 and "instance 2" in f.values["starving"]
    assert f.values["jain_index"] < 0.85
    fair = finding(
        10, docs.document([docs.level(server_metrics={"m": _busy(docs, labels, [8.0, 7.5, 8.2, 7.9])})])
    )
    assert fair.state == "NotFound" and fair.values["jain_index"] > 0.99
    idle = finding(
        10, docs.document([docs.level(server_metrics={"m": _busy(docs, labels, [0.5, 0.1, 0.1, 0.1])})])
    )
    assert idle.state == "NoData"  # nobody busy: fairness cannot be judged


def test_instance_starvation_from_gpu_gauges_and_telemetry(docs: Any, labels: Any) -> None:
    g = "nv_gpu_utilization"
    points = [
        {g: ("gauge", {labels(gpu_uuid="GPU-a"): a, labels(gpu_uuid="GPU-b"): b})}
        for a, b in [(0.0, 0.0), (0.9, 0.05), (0.95, 0.02), (0.0, 0.0)]
    ]
    delta = docs.prom_delta(points[0], points[-1], samples=points[1:-1])
    f = finding(10, docs.document([docs.level(server_metrics={"triton-metrics": delta})]))
    assert f.state == "Found" and f.values["instances"] == 2
    tel = docs.telemetry(
        [docs.gpu(0, 90.0), docs.gpu(1, 88.0)], fairness={"shares": {"gpu0": 0.9, "gpu1": 0.88}}
    )
    assert finding(10, docs.document([docs.level(telemetry=tel)])).state == "NotFound"
    assert finding(10, docs.document([docs.level()])).state == "NoData"


# -- trap 11 ---------------------------------------------------------------------------------
def test_serialisation_is_never_judged_on_the_servers_own_statistics(docs: Any) -> None:
    """Triton's compute_input/output is the server's account of itself: shown, never the verdict
    (the reference server writes whatever codec time it is told to)."""
    heavy = docs.triton_delta(docs.triton_body(100, 0.1, 1.0, input_ms=2.0, output_ms=2.0))
    f = finding(11, docs.document([docs.level(server_metrics={"s": heavy})]))
    assert f.state == "NoData" and f.values["codec_share"] == pytest.approx(4.0)
    assert "HTTP/gRPC pair" in f.summary and "--compare" in f.needs
    light = docs.triton_delta(docs.triton_body(100, 0.1, 1.0, input_ms=0.05, output_ms=0.05))
    assert finding(11, docs.document([docs.level(server_metrics={"s": light})])).state == "NoData"


def test_serialisation_http_against_grpc(docs: Any) -> None:
    http_doc = docs.document(
        [docs.level(records=docs.records({}, [6.0] * 20))], docs.plan(backend="triton-http")
    )
    grpc_doc = docs.document(
        [docs.level(records=docs.records({}, [2.0] * 20))], docs.plan(backend="triton-grpc")
    )
    f = finding(11, http_doc, compare=grpc_doc)
    assert f.state == "Found" and f.values["http_over_grpc"] == pytest.approx(3.0, rel=0.02)
    assert finding(11, grpc_doc, compare=http_doc).state == "Found"  # either way round
    even = docs.document([docs.level(records=docs.records({}, [2.1] * 20))], docs.plan(backend="triton-http"))
    assert finding(11, even, compare=grpc_doc).state == "NotFound"
    assert finding(11, http_doc, compare=http_doc).state == "NoData"  # two HTTP runs prove nothing
    assert finding(11, http_doc).state == "NoData"


# -- trap 12 ---------------------------------------------------------------------------------
def _sweep(docs: Any, first_ms: float, warmup: float = 0.0) -> Any:
    plan = docs.plan(
        payload={"shape_sweep": {"input_tokens": [8, 64, 512], "repeats": 6}},
        stage={"requests": 18, "warmup_s": warmup},
    )
    recs = []
    t = 0
    for shape in ("8", "64", "512"):
        recs += docs.records({"shape": shape}, [first_ms] + [10.0] * 5, start_ns=t)
        t += 100_000_000
    return docs.document([docs.level(records=recs, plan=plan)], plan)


def test_recompile_avalanche(docs: Any) -> None:
    f = finding(12, _sweep(docs, 400.0))
    assert f.state == "Found" and f.values["slow_first_hits"] == 3 and f.values["shapes"] == 3
    assert f.values["first_hit_ms"] == pytest.approx(400, rel=0.01) and f.values[
        "warm_p50_ms"
    ] == pytest.approx(10, rel=0.01)
    assert finding(12, _sweep(docs, 11.0)).state == "NotFound"
    assert "warm-up" in finding(12, _sweep(docs, 11.0, warmup=1.0)).summary
    assert finding(12, docs.document([docs.level()])).state == "NoData"


def test_recompile_counters_alone_never_decide(docs: Any, labels: Any) -> None:
    """Any counter named *compile* reaching 2 is no avalanche by itself: without first hits the
    client saw, NoData (the count shown); with a sweep whose first hits are cheap, NotFound."""
    name = "mcp_refserver_shape_compiles_total"
    delta = docs.prom_delta({name: ("counter", {(): 0.0})}, {name: ("counter", {(): 4.0})})
    f = finding(12, docs.document([docs.level(server_metrics={"m": delta})]))
    assert f.state == "NoData" and f.values["compiles"] == 4 and "first hit" in f.summary
    cheap = _sweep(docs, 11.0)
    cheap.levels[0].server_metrics = {"m": delta}
    g = finding(12, cheap)
    assert g.state == "NotFound" and g.values["compiles"] == 4


def test_preemptions_below_full_usage_with_usage_matching_the_tokens_held_are_not_fragmentation(
    docs: Any, labels: Any
) -> None:
    """vLLM on a busy host: usage sampled seconds apart misses the full cache at the preemption
    (40 % seen), while the usage matches what the running requests hold (1.07x). Under preemption
    that ratio runs high, so a low one is sound evidence against fragmentation: NotFound, where the
    sampled usage alone said Found."""
    k = labels(model_name="m")
    info = {labels(model_name="m", block_size="16", num_gpu_blocks="100"): 1.0}

    def point(p: float, u: float, running: float) -> dict[str, Any]:
        return {
            "vllm:num_preemptions_total": ("counter", {k: p}),
            "vllm:kv_cache_usage_perc": ("gauge", {k: u}),
            "vllm:num_requests_running": ("gauge", {k: running}),
            "vllm:cache_config_info": ("gauge", info),
        }

    points = [point(0, 0.0, 0), point(0, 0.4, 4), point(3, 0.4, 4), point(3, 0.0, 0)]
    delta = docs.prom_delta(points[0], points[-1], samples=points[1:-1])
    hist = {"count": 10.0, "sum": 1000.0, "mean": 100.0, "status": "ok"}
    for name in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        delta["metrics"][name] = {"type": "histogram", "status": "ok", "series": [{"labels": {}, **hist}]}
    a = assess_vllm(delta)
    assert a is not None and a["usage_at_preemption"] == pytest.approx(0.4)
    assert a["usage_over_held"] == pytest.approx(0.4 / 0.375) and a["state"] == "NotFound", a
