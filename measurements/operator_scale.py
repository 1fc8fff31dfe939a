"""The operator at scale, on the real control plane: many MCPReadiness applied at once, and many
idle objects held.

Prints, for ``--gates`` gates applied in one ``kubectl apply``:

- time from the apply to each gate's verdict (P50/P99), and the same less the check's own time
  (``status.checks[].durationMs``): what the operator adds by queueing, claiming and writing;
- requests the API server served for ``mcpreadinesses`` by verb, per gate, while they were judged
  and during an idle window afterwards (a periodic LIST or GET per object would show there);
- the operator's resident memory leading with no gates, then (its own process and its worker
  processes) with ``--idle`` decided objects held, and with ``--restart`` that of a new operator
  adopting them idle;
- one MCPBenchmark of ``--shards`` shards, every shard a pod the local kubelet really runs
  against the reference server: time from the apply to the merged verdict, and the report's size.

    .venv/bin/python measurements/operator_scale.py --gates 200 --idle 1000 --shards 64

The API server's counters (``apiserver_request_total``) count every client: the figures here
include this script's own LIST polls, which it counts and prints beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from mcp_devcluster import stack

REPO = Path(__file__).resolve().parents[1]
RESOURCE = "mcpreadinesses"
APPLIERS = 4  # kubectl processes that create the gates together


def gate(name: str, url: str) -> dict[str, Any]:
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": name},
        "spec": {
            "target": {"url": url},
            "checks": {
                "healthProbe": {
                    "path": "/health",
                    "requests": 100,
                    "concurrency": 4,
                    "minSuccessRatio": 0.99,
                    "maxP99Ms": 250,
                }
            },
        },
    }


def benchmark(name: str, url: str, shards: int) -> dict[str, Any]:
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPBenchmark",
        "metadata": {"name": name},
        "spec": {
            "target": {"url": url, "backend": "openai", "model": "refmodel"},
            "load": {"concurrency": [2], "durationSeconds": 2, "warmupSeconds": 0.2},
            "shards": shards,
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
            "slo": {"latencyP99Ms": 2000},
        },
    }


def run_benchmark(kubeconfig: Path, namespace: str, url: str, shards: int) -> None:
    """Apply one benchmark of ``shards`` shards and wait for its merged verdict."""
    name = f"shards-{shards}"
    started = time.monotonic()
    text = yaml.safe_dump(benchmark(name, url, shards))
    stack.kubectl(kubeconfig, "-n", namespace, "apply", "-f", "-", input_text=text)
    stack.kubectl(
        kubeconfig,
        "-n",
        namespace,
        "wait",
        "--for=condition=Complete",
        f"mcpbenchmark/{name}",
        "--timeout=900s",
        timeout=960,
    )
    took = time.monotonic() - started
    out = stack.kubectl(kubeconfig, "-n", namespace, "get", "mcpbenchmark", name, "-o", "json").stdout
    status = json.loads(out)["status"]
    report = stack.kubectl(kubeconfig, "-n", namespace, "get", "configmap", f"{name}-report", "-o", "json")
    rows = status.get("results") or [{}]
    print(
        f"one MCPBenchmark of {shards} shards: verdict {status.get('verdict')} in {took:.1f} s"
        " from the apply;"
        f" {rows[0].get('requests')} requests merged; report {len(report.stdout) / 1024:.0f} KiB,"
        f" status {len(json.dumps(status)) / 1024:.1f} KiB"
    )


def requests_by_verb(kubeconfig: Path) -> Counter[str]:
    """``apiserver_request_total`` for our resource, summed by verb (WATCH included)."""
    counts: Counter[str] = Counter()
    for (verb, _code), n in stack.api_requests(kubeconfig, RESOURCE).items():
        counts[verb] += n
    return counts


def listed(kubeconfig: Path, namespace: str) -> list[dict[str, Any]]:
    out = stack.kubectl(kubeconfig, "-n", namespace, "get", RESOURCE, "-o", "json", timeout=300).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def decided(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"]["generation"] and status.get("phase") in (
        "Succeeded",
        "Failed",
    )


def apply_and_time(kubeconfig: Path, namespace: str, url: str, count: int, prefix: str) -> dict[str, Any]:
    """Apply ``count`` gates at once; poll until all are decided; time each one."""
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    # kubectl creates the objects of one apply one after another (1,000 took 13.6 s): APPLIERS
    # of them at once come closer to "at once"
    manifests = [yaml.safe_dump_all([gate(n, url) for n in names[i::APPLIERS]]) for i in range(APPLIERS)]
    polls = 0
    started = time.monotonic()
    with ThreadPoolExecutor(APPLIERS) as appliers:
        list(
            appliers.map(
                lambda text: stack.kubectl(
                    kubeconfig, "-n", namespace, "apply", "-f", "-", input_text=text, timeout=600
                ),
                manifests,
            )
        )
    applied = time.monotonic() - started
    seen: dict[str, float] = {}
    created: dict[str, float] = {}
    own: dict[str, float] = {}
    verdicts: Counter[str] = Counter()
    deadline = started + 60 + count * 2
    while len(seen) < count:
        if time.monotonic() > deadline:
            pending = [o for o in listed(kubeconfig, namespace) if o["metadata"]["name"] not in seen]
            example = json.dumps(pending[0].get("status"), indent=1)[:2000] if pending else ""
            raise SystemExit(f"only {len(seen)} of {count} decided; one that was not: {example}")
        polls += 1
        for obj in listed(kubeconfig, namespace):
            name = obj["metadata"]["name"]
            if name in names and name not in seen and decided(obj):
                seen[name] = time.monotonic() - started
                created[name] = created_to_verdict(obj)
                rows = obj["status"].get("checks") or []
                own[name] = sum(row.get("durationMs") or 0 for row in rows) / 1000
                verdicts[obj["status"]["verdict"]] += 1
        time.sleep(0.25)
    return {
        "seen": seen,
        "own": own,
        "verdicts": verdicts,
        "polls": polls,
        "applied": applied,
        "created": created,
    }


def created_to_verdict(obj: dict[str, Any]) -> float:
    """Seconds from the object's creation to its Ready condition, by the API server's own
    timestamps (whole seconds): what the operator took, without kubectl's one-by-one creates."""
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    stamps = (obj["metadata"]["creationTimestamp"], ready["lastTransitionTime"])
    born, judged = (dt.datetime.fromisoformat(s.replace("Z", "+00:00")) for s in stamps)
    return (judged - born).total_seconds()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: list[float]) -> str:
    return f"P50 {percentile(values, 0.5):6.2f} s   P99 {percentile(values, 0.99):6.2f} s"


def rss_mib(pid: int) -> tuple[float, float]:
    """Resident memory of ``pid`` and of all its descendants, in MiB."""

    def rss(p: int) -> float:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    children: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            kids = (task / "children").read_text().split()
            children += [int(k) for k in kids]
            frontier += [int(k) for k in kids]
    return rss(pid), sum(rss(c) for c in children)


def size(mib: float) -> str:
    """A resident set in MiB (what ``/proc`` counts in) and in MB (what issue 37's goal is in)."""
    return f"{mib:.1f} MiB ({mib * 1.048576:.1f} MB)"


def restarted_rss(kubeconfig: Path, work: Path, operator: stack.OperatorProcess, idle_s: float) -> None:
    """The same gates, decided and idle, adopted by a new operator process: its memory without
    the burst's high-water mark, and what the adoption wrote."""
    stack.stop(operator.process)
    before = requests_by_verb(kubeconfig)
    started = time.monotonic()
    successor = stack.start_operator(kubeconfig, work, identity="scale-successor")
    try:
        led = time.monotonic() - started
        time.sleep(idle_s)
        wrote = requests_by_verb(kubeconfig) - before
        assert successor.process.popen is not None
        own_rss, workers_rss = rss_mib(successor.process.popen.pid)
        print(
            f"after a restart (leading {led:.1f} s after its start, then {idle_s:.0f} s idle): operator RSS "
            f"{size(own_rss)}, its worker processes {workers_rss:.0f} MiB; requests on {RESOURCE}: "
            + (", ".join(f"{verb} {n}" for verb, n in sorted(wrote.items())) or "none")
        )
    finally:
        stack.stop(successor.process)


@contextlib.contextmanager
def scale_cluster(prefix: str) -> Iterator[tuple[Path, stack.OperatedCluster]]:
    """The bed of the scale measurements: a control plane with the CRDs, the operator leading and
    a reference server that answers fast (5 ms to the first token, 1 ms a token); its work
    directory (the operators' logs) and the running cluster."""
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        stack.operated_cluster(Path(tmp), REPO / "crds", "--ttft-ms", "5", "--tpot-ms", "1") as running,
    ):
        yield Path(tmp), running


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gates", type=int, default=200, help="MCPReadiness applied at once")
    parser.add_argument("--idle", type=int, default=1000, help="decided gates held for the memory figure")
    parser.add_argument("--shards", type=int, default=64, help="shards of one benchmark (0: none)")
    parser.add_argument("--idle-window", type=float, default=30.0, help="seconds of the idle request count")
    parser.add_argument(
        "--restart", action="store_true", help="then restart the operator and measure it with the gates idle"
    )
    args = parser.parse_args()

    with scale_cluster("mcp-scale-") as (work, running):
        kubeconfig, url, operator = running.kubeconfig, running.refserver_url, running.operator
        assert operator.process.popen is not None
        stack.kubectl(kubeconfig, "create", "namespace", "scale")
        own_rss, _ = rss_mib(operator.process.popen.pid)
        print(f"operator RSS leading with no gates: {size(own_rss)}")

        before = requests_by_verb(kubeconfig)
        burst = apply_and_time(kubeconfig, "scale", url, args.gates, "burst")
        after = requests_by_verb(kubeconfig)
        times = list(burst["seen"].values())
        added = [burst["seen"][n] - burst["own"][n] for n in burst["seen"]]
        print(f"{args.gates} gates applied at once: verdicts {dict(burst['verdicts'])}")
        print(f"  apply to verdict      {spread(times)}   max {max(times):6.2f} s")
        created = list(burst["created"].values())
        print(
            f"  created to verdict    {spread(created)}   max {max(created):6.2f} s"
            f"   (server timestamps, whole seconds; the creates took {burst['applied']:.1f} s)"
        )
        own_median = statistics.median(burst["own"].values())
        print(f"  less the check's own  {spread(added)}   (check itself: median {own_median:.3f} s)")
        delta = after - before
        print(
            "  API requests on mcpreadinesses while judging, per gate: "
            + ", ".join(f"{verb} {n / args.gates:.2f}" for verb, n in sorted(delta.items()))
            + f"   (this script's LIST polls: {burst['polls']})"
        )
        quiet = requests_by_verb(kubeconfig)
        time.sleep(args.idle_window)
        idle = requests_by_verb(kubeconfig) - quiet
        print(
            f"  idle {args.idle_window:.0f} s afterwards: "
            + (", ".join(f"{verb} {n}" for verb, n in sorted(idle.items())) or "no requests")
            + "   (this script's own /metrics reads are not on this resource)"
        )

        if args.idle > args.gates:
            held = apply_and_time(kubeconfig, "scale", url, args.idle - args.gates, "idle")
            print(f"{args.idle} decided gates held ({dict(burst['verdicts'] + held['verdicts'])})")
        time.sleep(args.idle_window)
        own_rss, workers_rss = rss_mib(operator.process.popen.pid)
        print(f"  operator RSS {size(own_rss)}, its worker processes {workers_rss:.0f} MiB")
        if args.restart:
            restarted_rss(kubeconfig, work, operator, args.idle_window)
        if args.shards:
            run_benchmark(kubeconfig, "scale", url, args.shards)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
