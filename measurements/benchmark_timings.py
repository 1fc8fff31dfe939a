"""Two MCPBenchmark timings (issue 14): from ``kubectl apply`` to the first request sent, and the
merge and report of 64 shards x 1M requests.

**Apply to first request** (``--runs`` per setting, on the real control plane; shard pods are
local processes the harness's kubelet runs against the reference server): the clock starts just
before ``kubectl apply`` (the kubectl process included) and stops at

- the reference server's own arrival stamp of the first request it saw (``/debug/timings``,
  wall clock, reset before each run): the server's truth;
- the first send the shard recorded (the merged report's per-shard level windows), and, with
  several shards, the last shard's first send (when every shard was sending);

for one shard, ``--shards`` shards, and one shard with ``spec.observe.gpuSampler`` (the sampler
pod and its Service placed on the served Deployment's node before the Job).

**Merge and report** (no cluster): ``--docs`` shard documents of ``--requests`` requests in all,
spread over ``--levels`` closed-loop levels, each built by mcp-bench's own accumulator from
streamed requests (TTFT, 8 token arrivals, token counts, two request classes), signed and
checksummed as a shard publishes them. Timed, median of ``--repeats``: verifying every shard
(HMAC and CRC-32C), ``merge_documents``, the trap detectors on the merged document, fitting the
report object (``dumps_within``, 900 KiB), ``render_html``, and ``write_report`` (HTML + JUnit).

    .venv/bin/python measurements/benchmark_timings.py            # both
    .venv/bin/python measurements/benchmark_timings.py --no-cluster
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from mcp_bench.diagnose import DiagnoseInputs, diagnose
from mcp_bench.htmlreport import render_html
from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.reportfiles import write_report
from mcp_bench.results import EngineFingerprint, ResultDocument, dumps_document, loads_document
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.fit import dumps_within
from mcp_bench.results.merge import merge_documents
from mcp_devcluster import stack

REPO = Path(__file__).resolve().parents[1]
MS = 1_000_000
REPORT_LIMIT = 900 * 1024  # the operator's report object (benchmark.contract.RESULT_LIMIT_BYTES)
KEY = b"k" * 32


# -- merge and report ---------------------------------------------------------------------------


def _plan(levels: int) -> RunPlan:
    return RunPlan.from_dict(
        {
            "url": "http://vllm.ml.svc:8000",
            "backend": "openai",
            "model": "m",
            "levels": {"concurrency": [64 * 2**i for i in range(levels)]},
            "stage": {"requests": 1},
            "slo": {"latency_p99_ms": 2000, "ttft_p99_ms": 500},
        }
    )


def _records(rng: random.Random, n: int, start_ns: int, level: int) -> list[RequestRecord]:
    """``n`` streamed LLM requests of one level: TTFT and 8 inter-token gaps from lognormals that
    grow with the level, 1% failures, two classes."""
    out = []
    t = start_ns
    for _ in range(n):
        sent = t + int(rng.expovariate(1 / (2 * MS)))
        t = sent
        if rng.random() < 0.01:
            out.append(RequestRecord(sent_ns=sent, end_ns=sent + 5 * MS, error=ErrorKind.HTTP_STATUS))
            continue
        first = sent + int(rng.lognormvariate(17.5 + 0.2 * level, 0.4))
        times = [first]
        for _ in range(7):
            times.append(times[-1] + int(rng.lognormvariate(16.5 + 0.1 * level, 0.3)))
        out.append(
            RequestRecord(
                sent_ns=sent,
                end_ns=times[-1] + 100_000,
                first_token_ns=first,
                token_times_ns=times,
                input_tokens=rng.randint(64, 512),
                output_tokens=8,
                tokens_from_server=True,
                status=200,
                tags={"class": "chat" if rng.random() < 0.7 else "batch"},
            )
        )
    return out


def shard_document(shard: int, requests: int, plan: RunPlan, base_ns: int) -> str:
    """One shard's published result: its levels from mcp-bench's accumulator, signed."""
    rng = random.Random(shard)
    levels = []
    per_level = requests // len(plan.levels.concurrency or [])
    for index, conc in enumerate(plan.levels.concurrency or []):
        acc = LevelAccumulator(plan.slo, open_loop=False, late_after_ns=MS)
        for rec in _records(rng, per_level, base_ns + index * 60_000 * MS, index):
            acc.add(rec)
        levels.append(acc.to_result(LevelMeta(index=index, mode="closed", concurrency=conc // 64)))
    now = datetime.now(UTC)
    doc = ResultDocument(
        started_at=now, ended_at=now, engine=EngineFingerprint(), plan=plan, levels=levels, shards=1
    )
    return dumps_document(doc, KEY)


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def merge_and_report(docs: int, requests: int, levels: int, repeats: int) -> None:
    plan = _plan(levels)
    base = time.time_ns()
    t0 = time.perf_counter()
    texts = [shard_document(i, requests // docs, plan, base) for i in range(docs)]
    built = time.perf_counter() - t0
    size = sum(len(t) for t in texts)
    print(
        f"{docs} shard documents, {requests:,} requests in all ({levels} levels, streamed, 2 classes): "
        f"{size / 2**20:.1f} MiB of JSON, built in {built:.1f} s"
    )
    verify_s, shards = _timed(lambda: [loads_document(t, KEY) for t in texts], repeats)
    merge_s, merged = _timed(lambda: merge_documents(shards), repeats)
    diag_s, _ = _timed(lambda: diagnose(DiagnoseInputs(document=merged)), repeats)
    fit_s, report = _timed(lambda: dumps_within(merged, REPORT_LIMIT, KEY), repeats)
    html_s, page = _timed(lambda: render_html(merged), repeats)
    with tempfile.TemporaryDirectory() as tmp:
        write_s, _ = _timed(lambda: write_report(merged, Path(tmp) / "r.html", Path(tmp) / "r.xml"), repeats)
    assert sum(lv.sent for lv in merged.levels) == requests // docs * docs
    rows = [
        (f"verify {docs} shards (HMAC, CRC-32C)", verify_s),
        ("merge_documents", merge_s),
        ("trap detectors on the merged doc", diag_s),
        (f"report object (dumps_within, {len(report) / 1024:.0f} KiB)", fit_s),
        (f"render_html ({len(page) / 1024:.0f} KiB)", html_s),
        ("write_report (HTML + JUnit)", write_s),
    ]
    print(f"  median of {repeats}:")
    for name, seconds in rows:
        print(f"    {name:44s} {seconds:7.3f} s")
    print(f"    {'merge + report (merge, fit, write_report)':44s} {merge_s + fit_s + write_s:7.3f} s")


# -- apply to first request ---------------------------------------------------------------------


def _benchmark(name: str, url: str, shards: int, sampler: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "target": {"url": url, "backend": "openai", "model": "refmodel"},
        "load": {"concurrency": [1], "requests": 20, "warmupSeconds": 0},
        "shards": shards,
        "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
        "preflight": "off",
    }
    if sampler:
        spec["observe"] = {"gpuSampler": {"serviceRef": {"name": "served", "port": 8080}}}
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPBenchmark",
        "metadata": {"name": name},
        "spec": spec,
    }


def _serve(kubeconfig: Path, namespace: str) -> str:
    """The reference server as a Deployment behind a Service (for the sampler's node); its URL."""
    container = {
        "name": "server",
        "image": "unused",
        "command": ["python", "-m", "mcp_refserver"],
        "args": ["--host", "$(POD_IP)", "--port", "8000", "--ttft-ms", "5", "--tpot-ms", "1"],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": 8000}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1},
    }
    objs = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "served"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "served"}},
                "template": {
                    "metadata": {"labels": {"app": "served"}},
                    "spec": {"nodeSelector": {"mcp2026.io/local-runner": "true"}, "containers": [container]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "served"},
            "spec": {"selector": {"app": "served"}, "ports": [{"port": 8080, "targetPort": "http"}]},
        },
    ]
    stack.kubectl(kubeconfig, "-n", namespace, "apply", "-f", "-", input_text=yaml.safe_dump_all(objs))
    svc = json.loads(
        stack.kubectl(kubeconfig, "-n", namespace, "get", "service", "served", "-o", "json").stdout
    )
    url = f"http://{svc['spec']['clusterIP']}:8080"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return url
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _server_first_arrival(url: str, reset: bool = False) -> int | None:
    with urllib.request.urlopen(f"{url}/debug/timings{'?reset=1' if reset else ''}", timeout=5) as resp:
        arrivals = json.loads(resp.read())["arrival_unix_ns"]
    return min(arrivals) if arrivals else None


def apply_to_first_request(
    kubeconfig: Path, namespace: str, url: str, name: str, shards: int, sampler: bool
) -> tuple[float, float, float]:
    """Seconds from the apply to: the server's first arrival, the first shard's first send, the
    last shard's first send."""
    _server_first_arrival(url, reset=True)
    manifest = yaml.safe_dump(_benchmark(name, url, shards, sampler))
    t_apply = time.time_ns()
    stack.kubectl(kubeconfig, "-n", namespace, "apply", "-f", "-", input_text=manifest)
    deadline = time.monotonic() + 180
    while True:  # merged and reported, whatever its verdict (a short level may not be cluster-wide)
        status = json.loads(
            stack.kubectl(kubeconfig, "-n", namespace, "get", "mcpbenchmark", name, "-o", "json").stdout
        ).get("status", {})
        if status.get("reportName"):
            break
        assert time.monotonic() < deadline, f"{name} was never reported: {status.get('conditions')}"
        time.sleep(0.5)
    report = json.loads(
        stack.kubectl(
            kubeconfig, "-n", namespace, "get", "configmap", status["reportName"], "-o", "json"
        ).stdout
    )
    merged = loads_document(report["data"]["result.json"])
    first = merged.levels[0]
    windows = first.shard_windows or []
    starts = [w.start_unix_ns for w in windows] or [first.first_start_unix_ns or 0]
    arrival = _server_first_arrival(url)
    assert arrival is not None, "the server saw no request"
    stack.kubectl(kubeconfig, "-n", namespace, "delete", "mcpbenchmark", name, "--wait=false")
    return (arrival - t_apply) / 1e9, (min(starts) - t_apply) / 1e9, (max(starts) - t_apply) / 1e9


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f} s (min {min(values):5.2f}, max {max(values):5.2f})"


def cluster_timings(runs: int, shards: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="mcp-timings-") as tmp,
        stack.operated_cluster(Path(tmp), REPO / "crds", "--ttft-ms", "5", "--tpot-ms", "1") as running,
    ):
        kubeconfig, url = running.kubeconfig, running.refserver_url
        stack.kubectl(kubeconfig, "create", "namespace", "timings")
        served = _serve(kubeconfig, "timings")
        settings = [
            ("1 shard", url, 1, False),
            (f"{shards} shards", url, shards, False),
            ("1 shard + gpuSampler", served, 1, True),
        ]
        print(f"apply -> first request sent ({runs} runs each; the clock starts before kubectl apply):")
        for label, target, count, sampler in settings:
            seen = [
                apply_to_first_request(
                    kubeconfig, "timings", target, f"t{count}{int(sampler)}-{i}", count, sampler
                )
                for i in range(runs)
            ]
            print(f"  {label:22s} server's first arrival  {_spread([s[0] for s in seen])}")
            print(f"  {'':22s} first shard's first send {_spread([s[1] for s in seen])}")
            if count > 1:
                print(f"  {'':22s} last shard's first send  {_spread([s[2] for s in seen])}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=64, help="shard documents merged")
    parser.add_argument("--requests", type=int, default=1_000_000, help="requests over all shards")
    parser.add_argument("--levels", type=int, default=5, help="levels per shard")
    parser.add_argument("--repeats", type=int, default=3, help="timings per step (median)")
    parser.add_argument("--runs", type=int, default=5, help="applies per cluster setting")
    parser.add_argument("--shards", type=int, default=4, help="shards of the multi-shard setting")
    parser.add_argument("--no-cluster", action="store_true", help="only the merge and report timings")
    parser.add_argument("--no-merge", action="store_true", help="only the apply timings")
    args = parser.parse_args()
    if not args.no_merge:
        merge_and_report(args.docs, args.requests, args.levels, args.repeats)
    if not args.no_cluster:
        cluster_timings(args.runs, args.shards)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
