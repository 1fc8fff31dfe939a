"""Control-plane figures for the README: cold build time, warm start time, and the time from
``kubectl apply`` to the Ready condition of the samples.

Cold build times are the ones the build recorded in each component's stamp (a cold build is
``mcp-devcluster build`` with an empty cache, or ``--force``). Warm start and
apply-to-Ready are measured here, several times, and printed as median / min / max.

    .venv/bin/python measurements/controlplane.py --starts 3 --applies 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from mcp_devcluster import build, stack
from mcp_devcluster.cluster import DevCluster

REPO = Path(__file__).resolve().parents[1]


def _summary(values: list[float]) -> str:
    median, low, high = statistics.median(values), min(values), max(values)
    return f"median {median:6.2f} s   min {low:6.2f} s   max {high:6.2f} s   (n={len(values)})"


def cold_builds() -> dict[str, float]:
    figures = {}
    for name, component in build.components().items():
        stamp = component.bin_dir / build.STAMP
        if stamp.is_file():
            figures[f"{name} {component.version}"] = float(json.loads(stamp.read_text())["seconds"])
    return figures


def apply_to_ready(kubeconfig: Path, sample: str, url: str, name: str, kind: str) -> float:
    doc = yaml.safe_load(stack.render_sample((REPO / "manifests" / "samples" / sample).read_text(), url))
    doc["metadata"]["name"] = name
    started = time.monotonic()
    stack.kubectl(kubeconfig, "apply", "-f", "-", input_text=yaml.safe_dump(doc))
    stack.kubectl(
        kubeconfig, "wait", "--for=condition=Ready", f"{kind}/{name}", "--timeout=180s", timeout=240
    )
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=3, help="warm starts of the whole control plane")
    parser.add_argument("--applies", type=int, default=5, help="MCPReadiness applies timed to Ready")
    parser.add_argument(
        "--benchmarks", type=int, default=2, help="sample MCPBenchmark applies timed to Ready"
    )
    args = parser.parse_args()
    build.ensure_all()

    print("cold build (recorded by the build, 2 cores):")
    for name, seconds in cold_builds().items():
        print(f"  {name:24s} {seconds:7.1f} s")

    work = Path(tempfile.mkdtemp(prefix="mcp-cp-bench-"))
    starts, components = [], []
    for i in range(args.starts):
        cluster = DevCluster(work / f"start-{i}")
        state = cluster.up()
        starts.append(state.startup_seconds["total"])
        components.append(state.startup_seconds)
        if i < args.starts - 1:
            cluster.down()
    print("warm start (etcd .. nodes Ready and default service account):")
    print(f"  total                    {_summary(starts)}")
    for key in components[0]:
        if key != "total":
            print(f"  {key:24s} {_summary([c[key] for c in components])}")

    kubeconfig = Path(cluster.kubeconfig)
    stack.apply_crds(kubeconfig, REPO / "crds")
    refserver, url = stack.start_refserver(work, "--ttft-ms", "5", "--tpot-ms", "1")
    operator = stack.start_operator(kubeconfig, work)
    try:
        readiness = [
            apply_to_ready(kubeconfig, "mcpreadiness-refserver.yaml", url, f"ready-{i}", "mcpreadiness")
            for i in range(args.applies)
        ]
        benchmarks = [
            apply_to_ready(kubeconfig, "mcpbenchmark-refserver.yaml", url, f"bench-{i}", "mcpbenchmark")
            for i in range(args.benchmarks)
        ]
    finally:
        stack.stop(operator.process)
        stack.stop(refserver)
        cluster.down()
    print("kubectl apply -> Ready (operator running, sample from manifests/samples/):")
    print(f"  MCPReadiness (2000 probes) {_summary(readiness)}")
    print(f"  MCPBenchmark (2 shards, 2 levels x 3.5 s) {_summary(benchmarks)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
