#!/usr/bin/env python3
"""Validate the NVML sampler on a real GPU: readings follow load, agree with nvidia-smi, cost little.

For each sampling interval (default 5 ms and 100 ms) it starts ``GpuSampler``, runs
``measurements/gpu_load.py`` (idle, matrix-multiply loop, idle) in a separate process, and stops the
sampler. ``nvidia-smi --query-gpu=... -lms 100`` runs beside it the whole time. Reported per
interval: idle vs. load means (SM utilisation, power, memory, SM clock), mean absolute difference
from nvidia-smi (nearest sample in time), the sampler's CPU use (% of one core) and its interval
error and lateness (P50/P99). Also the cost of each NVML query. Writes ``gpu_telemetry.json`` (and a
PNG plot when matplotlib is there) to ``--out``.

Needs only the standard library, ``pynvml`` and (for the load) PyTorch: the sampler is loaded from
``bench/`` directly, so none of the project's other dependencies need to be installed.

    python3 measurements/gpu_telemetry.py --out /tmp/gpu-telemetry
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from mcp_bench.telemetry.nvml import GpuSampler  # noqa: E402
from mcp_bench.telemetry.series import TelemetrySeries  # noqa: E402
from mcp_bench.telemetry.stats import plot_points, summarise  # noqa: E402

SMI_FIELDS = ("memory.used", "utilization.gpu", "power.draw", "clocks.sm")
# nvidia-smi field -> (NVML field, factor that turns the NVML value into nvidia-smi's unit)
COMPARED = {
    "memory.used": ("mem_used_bytes", 1.0 / (1 << 20)),  # MiB
    "utilization.gpu": ("sm_util_pct", 1.0),
    "power.draw": ("power_w", 1.0),
    "clocks.sm": ("sm_clock_mhz", 1.0),
}
LOAD_FIELDS = {"sm_util_pct": 1.0, "power_w": 1.0, "mem_used_bytes": 1.0 / (1 << 30), "sm_clock_mhz": 1.0}
SETTLE_S = 1.0  # NVML utilisation averages over up to 1 s; skip that much after each phase change
TAIL_S = 0.25


class SmiReader:
    """Runs nvidia-smi in loop mode; each line is stamped with perf_counter_ns from its own timestamp."""

    def __init__(self, interval_ms: int) -> None:
        self.cmd = [
            "nvidia-smi",
            f"--query-gpu=timestamp,index,{','.join(SMI_FIELDS)}",
            "--format=csv,noheader,nounits",
            "-lms",
            str(interval_ms),
        ]
        self.rows: list[dict[str, Any]] = []
        self.bad_lines: list[str] = []
        self.stamp_offsets_ms: list[float] = []  # receipt minus nvidia-smi timestamp
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        wall_minus_perf = time.time_ns() - time.perf_counter_ns()
        for line in self._proc.stdout:
            received = time.perf_counter_ns()
            parts = [p.strip() for p in line.split(",")]
            try:
                stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                t_ns = int(stamp * 1e9) - wall_minus_perf
                row: dict[str, Any] = {"t_ns": t_ns, "gpu": int(parts[1])}
                for name, text in zip(SMI_FIELDS, parts[2:], strict=True):
                    row[name] = float(text)
            except (ValueError, IndexError):
                self.bad_lines.append(line.strip())
                continue
            self.stamp_offsets_ms.append((received - t_ns) / 1e6)
            self.rows.append(row)

    def stop(self) -> str:
        err = ""
        if self._proc is not None:
            self._proc.terminate()
            try:
                _, err = self._proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return err or ""


def nvml_query_costs() -> dict[str, Any]:
    """Mean and max duration of each NVML query the sampler makes, on GPU 0."""
    import pynvml as nvml

    nvml.nvmlInit()
    try:
        h = nvml.nvmlDeviceGetHandleByIndex(0)
        queries = {
            "nvmlDeviceGetMemoryInfo": (lambda: nvml.nvmlDeviceGetMemoryInfo(h), 200),
            "nvmlDeviceGetUtilizationRates": (lambda: nvml.nvmlDeviceGetUtilizationRates(h), 200),
            "nvmlDeviceGetPowerUsage": (lambda: nvml.nvmlDeviceGetPowerUsage(h), 200),
            "nvmlDeviceGetClockInfo(SM)": (lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM), 200),
            "nvmlDeviceGetPcieThroughput(TX)": (
                lambda: nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_TX_BYTES),
                10,
            ),
        }
        out: dict[str, Any] = {"driver": str(nvml.nvmlSystemGetDriverVersion())}
        for name, (fn, n) in queries.items():
            times = []
            try:
                for _ in range(n):
                    t0 = time.perf_counter_ns()
                    fn()
                    times.append(time.perf_counter_ns() - t0)
                out[name] = {"calls": n, "mean_ms": statistics.fmean(times) / 1e6, "max_ms": max(times) / 1e6}
            except nvml.NVMLError as exc:
                out[name] = {"error": str(exc)}
        return out
    finally:
        nvml.nvmlShutdown()


def run_load(args: argparse.Namespace) -> tuple[dict[str, dict[str, int]], dict[str, Any], str]:
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "gpu_load.py"),
        f"--idle-before={args.idle_before}",
        f"--load={args.load}",
        f"--idle-after={args.idle_after}",
        f"--ballast-gib={args.ballast_gib}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    phases: dict[str, dict[str, int]] = {}
    stats: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event["event"] == "phase":
            phases[event["name"]] = {"start_ns": event["start_ns"], "end_ns": event["end_ns"]}
        elif event["event"] in {"load_stats", "ready"}:
            stats.update(event)
    if done.returncode != 0 or len(phases) != 3:
        raise RuntimeError(f"gpu_load.py failed (rc {done.returncode}): {done.stderr[-2000:]}")
    return phases, stats, done.stderr


def steady(phase: dict[str, int]) -> tuple[int, int]:
    return phase["start_ns"] + int(SETTLE_S * 1e9), phase["end_ns"] - int(TAIL_S * 1e9)


def mean_in(series: TelemetrySeries, spans: list[tuple[int, int]], field: str, gpu: int = 0) -> float | None:
    values = [v for a, b in spans for v in series.window(a, b).values[gpu][field] if not math.isnan(v)]
    return statistics.fmean(values) if values else None


def idle_vs_load(series: TelemetrySeries, phases: dict[str, dict[str, int]]) -> dict[str, Any]:
    idle = [steady(phases["idle_before"]), steady(phases["idle_after"])]
    busy = [steady(phases["load"])]
    out: dict[str, Any] = {}
    for field, factor in LOAD_FIELDS.items():
        i, b = mean_in(series, idle, field), mean_in(series, busy, field)
        out[field] = {
            "idle_mean": None if i is None else i * factor,
            "load_mean": None if b is None else b * factor,
            "unit": "GiB" if field == "mem_used_bytes" else field.rsplit("_", 1)[-1],
        }
    return out


def agreement(
    series: TelemetrySeries, smi: list[dict[str, Any]], spans: list[tuple[int, int]]
) -> dict[str, Any]:
    """Mean |NVML - nvidia-smi| pairing each nvidia-smi row with the NVML sample nearest in time."""
    window = series.window()
    t = window.t_ns
    max_gap = max(series.interval_s * 1e9, 50e6)
    out: dict[str, Any] = {}
    for smi_name, (field, factor) in COMPARED.items():
        values = window.values[0][field]
        diffs, pairs_smi = [], []
        for row in smi:
            if row["gpu"] != 0 or not any(a <= row["t_ns"] <= b for a, b in spans):
                continue
            k = bisect.bisect_left(t, row["t_ns"])
            near = [j for j in (k - 1, k) if 0 <= j < len(t)]
            if not near:
                continue
            j = min(near, key=lambda j: abs(t[j] - row["t_ns"]))
            if abs(t[j] - row["t_ns"]) > max_gap or math.isnan(values[j]):
                continue
            diffs.append(abs(values[j] * factor - row[smi_name]))
            pairs_smi.append(row[smi_name])
        out[smi_name] = {
            "pairs": len(diffs),
            "mean_abs_diff": statistics.fmean(diffs) if diffs else None,
            "p95_abs_diff": sorted(diffs)[max(0, math.ceil(0.95 * len(diffs)) - 1)] if diffs else None,
            "smi_mean": statistics.fmean(pairs_smi) if pairs_smi else None,
        }
    return out


def update_periods(series: TelemetrySeries, span: tuple[int, int]) -> dict[str, float | None]:
    """Median time between changes of each reading: how often NVML itself refreshes it.

    Sampling faster than this sees the same value repeated; it is a property of the driver, not of
    the sampler, and says which fields a 5 ms interval actually resolves.
    """
    window = series.window(*span)
    out: dict[str, float | None] = {}
    for field, values in window.values[0].items():
        changes = [
            window.t_ns[i]
            for i in range(1, len(values))
            if not math.isnan(values[i]) and not math.isnan(values[i - 1]) and values[i] != values[i - 1]
        ]
        gaps = sorted(b - a for a, b in itertools.pairwise(changes))
        out[field] = gaps[len(gaps) // 2] / 1e6 if gaps else None
    return out


def one_interval(interval_s: float, args: argparse.Namespace, smi: SmiReader) -> dict[str, Any]:
    sampler = GpuSampler(interval_s).start()
    if not sampler.series.available:
        sampler.stop()
        return {"interval_s": interval_s, "status": "unavailable", "reason": sampler.series.reason}
    time.sleep(0.2)
    phases, load_stats, _ = run_load(args)
    time.sleep(0.2)
    series = sampler.stop()
    run_span = (phases["idle_before"]["start_ns"], phases["idle_after"]["end_ns"])
    steady_spans = [steady(p) for p in phases.values()]
    summary = summarise(series, *run_span)
    return {
        "interval_s": interval_s,
        "status": "ok",
        "phases": phases,
        "load": load_stats,
        "idle_vs_load": idle_vs_load(series, phases),
        "agreement_with_nvidia_smi": {
            "whole_run": agreement(series, smi.rows, [run_span]),
            "steady_phases": agreement(series, smi.rows, steady_spans),
        },
        "nvml_update_period_ms": update_periods(series, run_span),
        "sampler": summary["sampler"],
        "sampler_cost": summary["sampler_cost"],
        "read_errors": summary.get("read_errors", {}),
        "level_summary": summary,
        "plot": plot_points(series.window(*run_span), max_points=3000),
        "t0_ns": run_span[0],
    }


def plot(results: list[dict[str, Any]], smi: list[dict[str, Any]], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: {exc}"
    runs = [r for r in results if r.get("status") == "ok"]
    rows = [("sm_util_pct", "utilization.gpu", "SM util %", 1.0), ("power_w", "power.draw", "power W", 1.0)]
    rows += [
        ("mem_used_bytes", "memory.used", "memory GiB", 1 / (1 << 30)),
        ("sm_clock_mhz", "clocks.sm", "SM MHz", 1.0),
    ]
    fig, axes = plt.subplots(len(rows), len(runs), figsize=(6 * len(runs), 9), sharex="col", squeeze=False)
    for c, run in enumerate(runs):
        t0 = run["t0_ns"]
        pts = run["plot"]
        load = run["phases"]["load"]
        for r, (field, smi_name, label, factor) in enumerate(rows):
            ax = axes[r][c]
            ys = [None if v is None else v * factor for v in pts["gpus"][0][field]]
            ax.plot(pts["t_s"], ys, lw=0.8, label=f"NVML sampler {run['interval_s'] * 1e3:g} ms")
            smi_factor = 1 / 1024 if smi_name == "memory.used" else 1.0
            end = run["phases"]["idle_after"]["end_ns"]
            sx = [(s["t_ns"] - t0) / 1e9 for s in smi if s["gpu"] == 0 and t0 <= s["t_ns"] <= end]
            sy = [s[smi_name] * smi_factor for s in smi if s["gpu"] == 0 and t0 <= s["t_ns"] <= end]
            ax.plot(sx, sy, ".", ms=2.5, label="nvidia-smi -lms 100")
            ax.axvspan((load["start_ns"] - t0) / 1e9, (load["end_ns"] - t0) / 1e9, alpha=0.12, color="grey")
            ax.set_ylabel(label)
            if r == 0:
                ax.set_title(f"sampler interval {run['interval_s'] * 1e3:g} ms (grey: matmul load)")
                ax.legend(loc="upper left", fontsize=7)
        axes[-1][c].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", default="0.005,0.1", help="sampler intervals in seconds")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--idle-before", type=float, default=3.0)
    parser.add_argument("--load", type=float, default=8.0)
    parser.add_argument("--idle-after", type=float, default=3.0)
    parser.add_argument("--ballast-gib", type=float, default=16.0)
    parser.add_argument("--smi-interval-ms", type=int, default=100)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    intervals = [float(x) for x in args.intervals.split(",")]

    report: dict[str, Any] = {
        "clock": time.get_clock_info("perf_counter").implementation,
        "python": sys.version.split()[0],
    }
    probe = GpuSampler(0.1).start()
    report["gpus"] = [
        {"index": g.index, "name": g.name, "memory_total_bytes": g.memory_total_bytes}
        for g in probe.series.gpus
    ]
    status, reason = probe.series.status, probe.series.reason
    probe.stop()
    if status != "ok":
        report.update(status=status, reason=reason)
        (args.out / "gpu_telemetry.json").write_text(json.dumps(report, indent=1))
        print(f"telemetry unavailable: {reason}")
        return 1
    report["nvml_query_costs"] = nvml_query_costs()

    smi = SmiReader(args.smi_interval_ms) if shutil.which("nvidia-smi") else None
    if smi is not None:
        smi.start()
        report["nvidia_smi_command"] = " ".join(smi.cmd)
    results = [one_interval(i, args, smi or SmiReader(0)) for i in intervals]
    if smi is not None:
        report["nvidia_smi_stderr"] = smi.stop()[-500:]
        report["nvidia_smi_rows"] = len(smi.rows)
        report["nvidia_smi_bad_lines"] = smi.bad_lines[:5]
        offs = sorted(smi.stamp_offsets_ms)
        report["nvidia_smi_receipt_minus_timestamp_ms"] = (
            {"p50": offs[len(offs) // 2], "min": offs[0], "max": offs[-1]} if offs else None
        )
    report["runs"] = results
    (args.out / "gpu_telemetry.json").write_text(json.dumps(report, indent=1))
    try:
        report["plot"] = plot(results, smi.rows if smi else [], args.out / "gpu_telemetry.png")
    except Exception as exc:  # the figures above are already written; a plot failure must not lose them
        report["plot"] = f"plot failed: {type(exc).__name__}: {exc}"
    (args.out / "gpu_telemetry.json").write_text(json.dumps(report, indent=1))

    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    for run in results:
        if run["status"] != "ok":
            print(f"interval {run['interval_s']}: {run['status']} {run.get('reason', '')}")
            continue
        tflops = run["load"].get("tflops", 0)
        print(f"\n== sampler interval {run['interval_s'] * 1e3:g} ms  load {tflops:.0f} TFLOP/s")
        for field, v in run["idle_vs_load"].items():
            print(f"  {field:16s} idle {v['idle_mean']!s:>22}  load {v['load_mean']!s:>22} {v['unit']}")
        for name, v in run["agreement_with_nvidia_smi"]["steady_phases"].items():
            print(f"  vs nvidia-smi {name:16s} pairs {v['pairs']:4d} mean |diff| {v['mean_abs_diff']}")
        print(f"  cost {json.dumps(run['sampler_cost'])}")
        print(f"  jitter {json.dumps(run['sampler'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
