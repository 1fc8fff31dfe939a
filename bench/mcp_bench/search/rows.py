"""A search as rows of text, for views that lay tables out (the HTML report): what it found, and
every probe in the order it ran."""

from __future__ import annotations

from mcp_bench.saturation import SearchOutcome

PROBE_HEADERS = ["#", "Step", "Load", "SLO", "Throughput rps", "Goodput rps", "Mean ms", "P99 ms"]


def _fig(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _knee(outcome: SearchOutcome) -> str:
    knee = outcome.knee
    if knee is None:
        return outcome.knee_note
    throughput = f"{_fig(knee.throughput_rps)} -> {_fig(knee.next_throughput_rps)} rps"
    latency = f"{_fig(knee.latency_mean_ms)} -> {_fig(knee.next_latency_mean_ms)} ms"
    where = f"at {_fig(knee.load)}, shown at {_fig(knee.next_load)}"
    return f"{where}: throughput {throughput}, mean latency {latency}"


def summary_rows(outcome: SearchOutcome) -> list[list[str]]:
    unit = " r/s" if outcome.over == "rate" else " in flight"
    answer = (
        f"{_fig(outcome.max_goodput_load)}{unit} ({_fig(outcome.max_goodput_rps)} good rps)"
        if outcome.found
        else "no load met the SLO"
    )
    return [
        ["searched", outcome.over],
        ["max goodput at", answer],
        ["lowest load that missed", _fig(outcome.lowest_failing_load)],
        ["knee", _knee(outcome)],
        ["stopped", f"{outcome.stop_reason}: {outcome.message}"],
    ]


def probe_rows(outcome: SearchOutcome) -> list[list[str]]:
    return [
        [
            str(i + 1),
            p.step,
            _fig(p.load),
            "Pass" if p.passed else "Fail",
            _fig(p.throughput_rps),
            _fig(p.goodput_rps),
            _fig(p.latency_mean_ms),
            _fig(p.latency_p99_ms),
        ]
        for i, p in enumerate(outcome.probes)
    ]
