"""Trap 6: PagedAttention page fragmentation. vLLM preempts requests although its KV cache is far
from full: blocks are lost to fragmentation. Read from the vLLM metrics the run records per level
(``mcp-bench run --server-metrics vllm``): the preemption counter's delta, and the KV-cache usage
sampled during the level at the moments preemptions happened (``timeline``; two snapshots at the
level's edges cannot show it). When vLLM exposes its cache size (``vllm:cache_config_info``) and
per-request token histograms, the usage is also set against the tokens the running requests hold.

Entry point for one level's vLLM delta: :func:`assess_vllm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import counter_total, gauge_series, metric, probe_deltas, timeline_sum

PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
THRESHOLDS = {"usage_below": 0.85, "usage_over_held": 1.5}


def _fraction(v: float) -> float:
    return v / 100.0 if v > 1.5 else v  # vLLM reports 0..1; tolerate a percentage


def _busy_samples(delta: dict[str, Any], count: int) -> list[bool]:
    """Per usage sample, whether the server held a request then (running or waiting); all True
    where the server's request gauges were not sampled alongside (nothing to tell them apart)."""
    gauges = [
        tl[1]
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
        if (tl := timeline_sum(delta, name)) is not None and len(tl[1]) == count
    ]
    if not gauges:
        return [True] * count
    return [any((g[i] or 0) > 0 for g in gauges) for i in range(count)]


def _held_ratio(delta: dict[str, Any], usage: list[float | None]) -> float | None:
    """Observed KV usage over what the running requests' tokens would fill (None without the data)."""
    info = gauge_series(delta, "vllm:cache_config_info")
    if not info:
        return None
    labels = info[0].get("labels", {})
    try:
        capacity = float(labels["block_size"]) * float(labels["num_gpu_blocks"])
    except (KeyError, ValueError):
        return None
    means = []
    for name in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"):
        m = metric(delta, name)
        series = [s for s in (m or {}).get("series", []) if s.get("mean") is not None]
        if not series:
            return None
        means.append(float(series[0]["mean"]))
    running = timeline_sum(delta, "vllm:num_requests_running")
    if running is None or capacity <= 0:
        return None
    per_request = means[0] + means[1] / 2  # a running request has generated half its output on average
    pairs = [
        (_fraction(u), r * per_request / capacity)
        for u, r in zip(usage, running[1], strict=False)
        if u is not None and r
    ]
    expected = sum(e for _, e in pairs)
    return sum(u for u, _ in pairs) / expected if pairs and expected > 0 else None


def assess_vllm(delta: dict[str, Any], thresholds: Mapping[str, float] = THRESHOLDS) -> dict[str, Any] | None:
    """One level's vLLM metrics delta judged for fragmentation; None when it holds no vLLM metrics.

    Returns ``state`` (Found, NotFound, NoData), ``preemptions``, ``usage_at_preemption`` (the
    highest KV usage, 0..1, in the samples around each rise of the counter), ``peak_usage`` and,
    when the data allow, ``usage_over_held`` (which decides only where nothing was preempted)."""
    preemptions = counter_total(delta, *PREEMPTIONS)
    if preemptions is None:
        return None
    out: dict[str, Any] = {"preemptions": preemptions}
    usage_tl = timeline_sum(delta, *USAGE)
    pre_tl = timeline_sum(delta, *PREEMPTIONS)
    usage: list[float | None] = usage_tl[1] if usage_tl else []
    real = [_fraction(u) for u in usage if u is not None]
    if real:
        out["peak_usage"] = max(real)
        out["samples"] = len(real)
    else:
        edges = [
            float(s["max"]) for name in USAGE for s in gauge_series(delta, name) if s.get("max") is not None
        ]
        out["peak_usage"] = _fraction(max(edges)) if edges else None
    at = []
    busy = _busy_samples(delta, len(usage))
    if usage_tl and pre_tl and len(usage) == len(pre_tl[1]):
        counts = pre_tl[1]
        for i in range(1, len(counts)):
            a, b = counts[i - 1], counts[i]
            if a is not None and b is not None and b > a:
                # the sample after the rise too: freed blocks go straight to waiting requests, so
                # a full cache stays full there, while the sample before may still be filling;
                # a sample with no request in the server saw none of it (a starved sampler's
                # readings before the load or after it): it is no evidence either way
                around = [
                    _fraction(u)
                    for j, u in enumerate(usage[i - 1 : i + 2], i - 1)
                    if u is not None and busy[j]
                ]
                if around:
                    at.append(max(around))
    out["usage_at_preemption"] = max(at) if at else None
    ratio = _held_ratio(delta, usage) if usage else None
    out["usage_over_held"] = ratio
    over = ratio is not None and ratio >= thresholds["usage_over_held"]
    if preemptions <= 0:
        out["state"] = "Found" if over else "NotFound"
    elif at:
        # With preemptions the usage at the moment decides: the held-token estimate counts only the
        # running requests, which under preemption are the longest ones, so its ratio runs high.
        # For that same reason a ratio under the bound is sound evidence against fragmentation: the
        # usage samples then missed the peak (on a busy host they are seconds apart), not a block.
        below = max(at) < thresholds["usage_below"]
        out["state"] = "Found" if below and (ratio is None or over) else "NotFound"
    else:
        out["state"] = "NoData"
    return out


@detector(
    6,
    "paged-fragmentation",
    "PagedAttention page fragmentation",
    advice="Tune block_size, gpu_memory_utilization and max_num_seqs (or enable prefix caching) so "
    "allocations fit; preemptions well below full KV usage mean blocks are lost to fragmentation.",
    needs="vLLM metrics per level with KV-cache usage sampled during the level (mcp-bench run "
    "--server-metrics vllm; the default --server-metrics-interval 1s samples it)",
    thresholds=THRESHOLDS,
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    rows = []
    for level in doc.levels if doc else []:
        for name, delta in probe_deltas(level).items():
            a = assess_vllm(delta, t)
            if a is not None:
                rows.append((level.level_label, name, a))
    if not rows:
        return d.no_data("no vLLM metrics (vllm:num_preemptions_total) in any level", t)
    rank = {"Found": 2, "NoData": 1, "NotFound": 0}
    label, name, a = max(rows, key=lambda r: (rank[r[2]["state"]], r[2]["preemptions"]))
    values = {k: v for k, v in a.items() if k != "state"}
    at = a["usage_at_preemption"]
    src = f"{name} (vLLM metrics)"
    if a["state"] == "NoData":
        return d.no_data(
            f"{a['preemptions']:.0f} preemptions, but no KV-cache usage sampled during the level while "
            "requests were in the server",
            t,
            level=label,
            values=values,
            source=src,
            needs="KV-cache usage sampled during the level (--server-metrics-interval, default 1s)",
        )
    if a["preemptions"] <= 0:
        summary = "no preemption in any level"
        if a.get("usage_over_held") is None:
            summary += (
                " (KV usage never sampled beside the requests the server held: fragmentation without "
                "preemption not judged)"
            )
    elif at is not None:
        summary = f"{a['preemptions']:.0f} preemptions with the KV cache at most {at:.0%} used"
    else:
        summary = f"{a['preemptions']:.0f} preemptions"
    if a.get("usage_over_held") is not None:
        summary += f"; usage {a['usage_over_held']:.2f}x what running requests hold"
    if a["state"] == "Found":
        return d.found(summary, t, level=label, values=values, source=src)
    if a["preemptions"] > 0:
        summary += ": real cache pressure, not fragmentation"
    return d.not_found(summary, t, level=label, values=values, source=src)
