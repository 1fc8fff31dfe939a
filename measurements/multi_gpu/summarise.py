#!/usr/bin/env python3
"""The table of ``run_x2.sh``: per run, level and GPU what mcp-bench's NVML sampler read (SM %,
memory peak, power, NVLink tx+rx) beside what ``nvidia-smi --query-gpu`` read in the same level
(the cross-check), the fairness across the GPUs, NVLink traffic from ``nvidia-smi nvlink -gt d``
over the whole run against NVML's, each rank's collective share from the server's /metrics, and
trap 5's and trap 10's verdicts. Markdown on stdout; ``--json`` writes the same rows as JSON.

Windows: the sampler's figures cover the level as mcp-bench's observer saw it (warm-up included);
nvidia-smi's rows are taken between the level's first measured send and last measured end. Needs
``bench/`` on the path and the benchmark's dependencies.

    PYTHONPATH=bench python3 measurements/multi_gpu/summarise.py WORKDIR [--json summary.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp_bench.results.document import loads_document

GIB = 1024.0**3
LINK = re.compile(r"Link\s+(\d+):\s+Data\s+(Tx|Rx):\s+(\d+)\s*KiB", re.IGNORECASE)
GPU_LINE = re.compile(r"^GPU\s+(\d+):")


def smi_rows(path: Path) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,utilization.memory,memory.used,
    memory.total,power.draw,clocks.sm --format=csv,noheader,nounits`` rows (times as UTC)."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    for line in path.read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 9:
            continue
        try:
            ts = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()
            rows.append(
                {
                    "t": ts,
                    "index": int(parts[1]),
                    "util": _num(parts[3]),
                    "mem_mib": _num(parts[5]),
                    "power_w": _num(parts[7]),
                }
            )
        except ValueError:
            continue
    return rows


def _num(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return math.nan


def _mean(xs: list[float]) -> float | None:
    real = [x for x in xs if not math.isnan(x)]
    return sum(real) / len(real) if real else None


def nvlink_kib(path: Path) -> dict[int, float]:
    """Per GPU, the sum of its links' data Tx and Rx counters (KiB) in ``nvidia-smi nvlink -gt d``."""
    out: dict[int, float] = {}
    gpu = None
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        m = GPU_LINE.match(line.strip())
        if m:
            gpu = int(m.group(1))
            continue
        m = LINK.search(line)
        if m and gpu is not None:
            out[gpu] = out.get(gpu, 0.0) + float(m.group(3))
    return out


def _field(gpu: dict[str, Any], name: str, stat: str) -> float | None:
    f = gpu.get("fields", {}).get(name)
    return float(f[stat]) if isinstance(f, dict) and f.get("status") == "ok" else None


def _findings(path: Path) -> list[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [
        {
            "file": path.stem,
            "trap": f["trap"],
            "state": f["state"],
            "summary": f["summary"],
            "values": f["values"],
        }
        for f in rows
        if f.get("trap") in (5, 10)
    ]


def _rank_shares(path: Path) -> dict[str, float]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            m = re.match(r'mcp_tp_rank_collective_share\{rank="(\d+)"\}\s+(\S+)', line)
            if m:
                out[f"rank{m.group(1)}"] = float(m.group(2))
    return out


def run_rows(run: Path, result: Path, smi: Path) -> list[dict[str, Any]]:
    doc = loads_document(result.read_bytes())
    samples = smi_rows(smi)
    rows = []
    for level in doc.levels:
        tel = level.telemetry if isinstance(level.telemetry, dict) else {}
        lo = (level.first_start_unix_ns or 0) / 1e9
        hi = (level.last_end_unix_ns or 0) / 1e9
        fair = tel.get("fairness") if isinstance(tel.get("fairness"), dict) else {}
        for g in tel.get("gpus", []):
            idx = int(g["index"])
            mine = [r for r in samples if r["index"] == idx and lo <= r["t"] <= hi]
            tx = _field(g, "nvlink_tx_kib_s", "mean")
            rx = _field(g, "nvlink_rx_kib_s", "mean")
            mem_peak = _field(g, "mem_used_bytes", "peak")
            rows.append(
                {
                    "run": run.name,
                    "result": result.name,
                    "level": level.level_label,
                    "gpu": idx,
                    "nvml_samples": (g.get("fields", {}).get("sm_util_pct") or {}).get("samples"),
                    "nvml_sm_pct": _field(g, "sm_util_pct", "mean"),
                    "smi_util_pct": _mean([r["util"] for r in mine]),
                    "nvml_mem_peak_gib": None if mem_peak is None else mem_peak / GIB,
                    "smi_mem_peak_gib": max((r["mem_mib"] for r in mine), default=math.nan) * 1024**2 / GIB
                    if mine
                    else None,
                    "nvml_power_w": _field(g, "power_w", "mean"),
                    "smi_power_w": _mean([r["power_w"] for r in mine]),
                    "smi_samples": len(mine),
                    "nvml_nvlink_gbs": None if tx is None or rx is None else (tx + rx) * 1024 / 1e9,
                    "fairness": {k: fair.get(k) for k in ("std", "min_max_ratio", "jain_index")}
                    if fair
                    else None,
                }
            )
    return rows


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--json", type=Path, help="also write every row as JSON here")
    args = parser.parse_args(argv)
    gpu_rows: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    shares: dict[str, dict[str, float]] = {}
    for run in sorted(p for p in args.workdir.iterdir() if p.is_dir()):
        results = [
            p for p in run.glob("*result.json") if p.name == "result.json" or p.name.endswith(".result.json")
        ]
        for result in sorted(results):
            smi = run / (result.name.removesuffix("result.json") + "smi.csv")
            if result.name == "result.json":
                smi = run / "smi.csv"
            try:
                gpu_rows += run_rows(run, result, smi)
            except (OSError, ValueError) as exc:
                findings.append(
                    {"file": f"{run.name}/{result.name}", "error": f"{type(exc).__name__}: {exc}"}
                )
        for f in sorted(run.glob("diagnose_*.json")):
            findings += [{"run": run.name, **x} for x in _findings(f)]
        before, after = nvlink_kib(run / "nvlink_before.txt"), nvlink_kib(run / "nvlink_after.txt")
        for gpu in sorted(after):
            links.append(
                {"run": run.name, "gpu": gpu, "smi_nvlink_gib": (after[gpu] - before.get(gpu, 0.0)) / 1024**2}
            )
        if (run / "metrics.txt").exists():
            shares[run.name] = _rank_shares(run / "metrics.txt")

    print(
        "| run | level | GPU | SM % NVML / smi | mem peak GiB NVML / smi | power W NVML / smi "
        "| NVLink GB/s NVML | samples NVML / smi | fairness std, min/max, Jain |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in gpu_rows:
        fair = r["fairness"] or {}
        fair_s = (
            ", ".join(_fmt(fair.get(k), 2) for k in ("std", "min_max_ratio", "jain_index")) if fair else "-"
        )
        print(
            f"| {r['run']}/{r['result'].removesuffix('.result.json')} | {r['level']} | {r['gpu']} "
            f"| {_fmt(r['nvml_sm_pct'])} / {_fmt(r['smi_util_pct'])} "
            f"| {_fmt(r['nvml_mem_peak_gib'], 2)} / {_fmt(r['smi_mem_peak_gib'], 2)} "
            f"| {_fmt(r['nvml_power_w'])} / {_fmt(r['smi_power_w'])} | {_fmt(r['nvml_nvlink_gbs'], 2)} "
            f"| {_fmt(r['nvml_samples'])} / {r['smi_samples']} | {fair_s} |"
        )
    print("\n| run | GPU | NVLink data over the run, GiB (nvidia-smi nvlink -gt d) |")
    print("| --- | --- | --- |")
    for link in links:
        print(f"| {link['run']} | {link['gpu']} | {_fmt(link['smi_nvlink_gib'], 3)} |")
    print("\n| run | collective share per rank (/metrics, whole run) |")
    print("| --- | --- |")
    for run_name, s in shares.items():
        print(f"| {run_name} | {', '.join(f'{k} {v:.2f}' for k, v in sorted(s.items()))} |")
    print("\n| run | from | trap | state | summary |")
    print("| --- | --- | --- | --- | --- |")
    for f in findings:
        if "error" in f:
            print(f"| {f['file']} | | | error | {f['error']} |")
        else:
            print(f"| {f['run']} | {f['file']} | {f['trap']} | {f['state']} | {f['summary']} |")
    if args.json:
        payload = {"gpus": gpu_rows, "nvlink": links, "collective_share": shares, "findings": findings}
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
