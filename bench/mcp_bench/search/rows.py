"""A search as text: rows for views that lay tables out (the HTML report), what it found and
every probe in the order it ran, and the one line the quiet CLI and the operator's status show.
No terminal library here: the operator imports it."""

from __future__ import annotations

from mcp_bench.saturation import SearchOutcome

PROBE_HEADERS = ["#", "Step", "Load", "SLO", "Throughput rps", "Goodput rps", "Mean ms", "P99 ms"]


def figure(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{unit}"


def _knee(outcome: SearchOutcome) -> str:
    knee = outcome.knee
    if knee is None:
        return outcome.knee_note
    throughput = f"{figure(knee.throughput_rps)} -> {figure(knee.next_throughput_rps)} rps"
    latency = f"{figure(knee.latency_mean_ms)} -> {figure(knee.next_latency_mean_ms)} ms"
    where = f"at {figure(knee.load)}, shown at {figure(knee.next_load)}"
    return f"{where}: throughput {throughput}, mean latency {latency}"


def summary_rows(outcome: SearchOutcome) -> list[list[str]]:
    unit = " r/s" if outcome.over == "rate" else " in flight"
    answer = (
        f"{figure(outcome.max_goodput_load)}{unit} ({figure(outcome.max_goodput_rps)} good rps)"
        if outcome.found
        else "no load met the SLO"
    )
    return [
        ["searched", outcome.over],
        ["max goodput at", answer],
        ["lowest load that missed", figure(outcome.lowest_failing_load)],
        ["knee", _knee(outcome)],
        ["stopped", f"{outcome.stop_reason}: {outcome.message}"],
    ]


def probe_rows(outcome: SearchOutcome) -> list[list[str]]:
    return [
        [
            str(i + 1),
            p.step,
            figure(p.load),
            "Pass" if p.passed else "Fail",
            figure(p.throughput_rps),
            figure(p.goodput_rps),
            figure(p.latency_mean_ms),
            figure(p.latency_p99_ms),
        ]
        for i, p in enumerate(outcome.probes)
    ]


def search_line(outcome: SearchOutcome) -> str:
    """One line: the answer, the knee and the stop reason (the quiet form, and the operator's)."""
    unit = " r/s" if outcome.over == "rate" else ""
    answer = (
        f"max goodput at {figure(outcome.max_goodput_load, unit)} "
        f"({figure(outcome.max_goodput_rps)} good rps)"
        if outcome.found
        else "no load met the SLO"
    )
    knee = outcome.knee
    knee_text = (
        f"knee at {figure(knee.load, unit)} (shown at {figure(knee.next_load, unit)}: throughput "
        f"{figure(knee.throughput_rps)} -> {figure(knee.next_throughput_rps)} rps, latency "
        f"{figure(knee.latency_mean_ms)} -> {figure(knee.next_latency_mean_ms)} ms)"
        if knee is not None
        else outcome.knee_note
    )
    return f"{answer}; {knee_text}; stopped: {outcome.stop_reason} ({outcome.message})"
