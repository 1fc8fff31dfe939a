#!/usr/bin/env python3
"""The reference table on this machine: text and multimodal requests at concurrency 64/256/512
against the reference server, with P50/P95/P99 latency, throughput, the server's GPU memory peak
(its memory model: a base plus what each request in service holds) and the output consistency of
fixed probes against their at-rest answers. The same plans as the H200 run against the GPU model
server (``measurements/gpu_model_server/{text,multimodal}.yaml``), pointed at a reference server
started here, one fresh server per workload, one client process (2 cores).

    .venv/bin/python measurements/reference_table.py            # prints the Markdown table
    .venv/bin/python measurements/reference_table.py --seconds 5 --out DIR
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from mcp_bench.forensics.sources import memory_forensics
from mcp_bench.results.document import PercentileTable, ResultDocument, loads_document

HERE = Path(__file__).parent
MIB = 2**20
SERVER = [
    "--ttft-ms", "20", "--tpot-ms", "5", "--tokens-per-chunk", "8", "--image-ms", "2",
    "--capacity", "256",  # slots in service, as the GPU model server's batch; the rest queue
    "--gpu-memory-per-request-bytes", str(48 * MIB),
]  # fmt: skip


def _plan(workload: str, url: str, seconds: float) -> dict[str, Any]:
    plan: dict[str, Any] = yaml.safe_load((HERE / "gpu_model_server" / f"{workload}.yaml").read_text())
    plan.update(url=url, model="refmodel", workers=1)
    plan["stage"] = {"warmup_s": 1, "duration_s": seconds}
    plan["observe"] = {"server_metrics": ["triton"], "timeline_interval_s": 0.25, "settle_s": 1}
    plan["consistency"] = {"probes": 4, "interval_s": 1.0, "max_tokens": 16}
    plan["labels"] = {"workload": workload, "server": "mcp-refserver"}
    return plan


def _run(workload: str, seconds: float, out: Path) -> ResultDocument:
    server = subprocess.Popen(
        [sys.executable, "-m", "mcp_refserver", "--port", "0", *SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        plan = out / f"{workload}.plan.yaml"
        plan.write_text(yaml.safe_dump(_plan(workload, url, seconds)))
        result = out / f"{workload}.result.json"
        subprocess.run(
            [sys.executable, "-m", "mcp_bench.cli", "run", "--plan", str(plan), "-o", str(result), "-q"],
            check=False,
        )
        return loads_document(result.read_text())
    finally:
        server.terminate()
        server.wait(10)


def _f(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def rows(doc: ResultDocument) -> list[list[str]]:
    memory = next(
        (v for k, v in memory_forensics(doc).items() if k.endswith(":nv_gpu_memory_used_bytes")), None
    )
    peaks = {r["level"]: r.get("peak_percent") for r in memory["levels"]} if memory else {}
    out = []
    for lv in doc.levels:
        e2e, ttft = (lv.latency.get(k, PercentileTable()) for k in ("e2e", "ttft"))
        c = lv.consistency or {}
        mismatch = c.get("mismatch_rate")
        consistency = (
            "-" if not c else f"{c.get('state')} ({_f(None if mismatch is None else 100 * mismatch, 1)} %)"
        )
        out.append(
            [
                doc.plan.labels.get("workload", ""),
                str(lv.concurrency),
                _f(e2e.p50_ms),
                _f(e2e.p95_ms),
                _f(e2e.p99_ms),
                _f(ttft.p50_ms),
                _f(lv.throughput_rps),
                _f(peaks.get(lv.level_label), 2),
                consistency,
                f"{lv.completed:,}",
                str(sum(lv.errors.values())),
            ]
        )
    return out


HEADER = ["workload", "concurrency", "e2e P50 ms", "e2e P95 ms", "e2e P99 ms", "TTFT P50 ms", "req/s"]
HEADER += ["GPU mem peak % (server)", "output consistency (tokens differing)", "completed", "errors"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per level")
    parser.add_argument("--out", type=Path, help="keep the plans and result documents here")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="reference-table-"))
    out.mkdir(parents=True, exist_ok=True)
    table = [HEADER, ["---"] * len(HEADER)]
    for workload in ("text", "multimodal"):
        table += rows(_run(workload, args.seconds, out))
    sys.stdout.write("".join("| " + " | ".join(r) + " |\n" for r in table))
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
