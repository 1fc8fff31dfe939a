"""The MCP2026 drill profile with its stage load from shard Jobs, on the local control plane:
the reference server as a Deployment (``manifests/refserver``) behind its Service, an
MCPReadiness with ``profile: MCP2026``, ``scale`` for the rates and ``durationScale`` for the
time, and ``drill.shards`` placing the load's shard pods on the local nodes. Prints each stage
(requested, achieved, P50/P99, client-bound flags, the P99 of every window, the jump point) and
the KPI board, and exits 0 when every stage kept its requested rate within 2 % either way with
no client bound (the rate this machine carries), 1 when not: each window offers rate x time
within one arrival, so a stage off by more was not given or not carried its load.

    .venv/bin/python measurements/drill_profile.py --scale 1 --duration-scale 0.1 --shards 2
    .venv/bin/python measurements/drill_profile.py --scale 0.25 --duration-scale 0.1 --shards 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from mcp_devcluster import stack

REPO = Path(__file__).resolve().parents[1]
LOCAL = {"mcp2026.io/local-runner": "true"}
RATE_TOLERANCE = 0.02  # a stage's achieved rate within this share of its requested one


def _kubectl(kubeconfig: Path, *args: str, input_text: str | None = None) -> str:
    return stack.kubectl(kubeconfig, *args, input_text=input_text, timeout=600).stdout


def _refserver(kubeconfig: Path, replicas: int) -> str:
    """The reference server's Deployment, ``replicas`` pods, behind its Service: its URL."""
    deployment = yaml.safe_load((REPO / "manifests" / "refserver" / "deployment.yaml").read_text())
    deployment["spec"]["replicas"] = replicas
    _kubectl(kubeconfig, "apply", "-f", "-", input_text=yaml.safe_dump(deployment))
    _kubectl(kubeconfig, "apply", "-f", str(REPO / "manifests" / "refserver" / "service.yaml"))
    _kubectl(kubeconfig, "rollout", "status", "deployment/refserver", "--timeout=120s")
    service = json.loads(_kubectl(kubeconfig, "get", "service", "refserver", "-o", "json"))
    port = service["spec"]["ports"][0]["port"]
    return f"http://{service['spec']['clusterIP']}:{port}"


def _gate(url: str, args: argparse.Namespace) -> str:
    drill = {
        "profile": "MCP2026",
        "scale": args.scale,
        "durationScale": args.duration_scale,
        "shards": {"count": args.shards, "runner": {"nodeSelector": LOCAL, "cpu": "100m", "memory": "256Mi"}},
    }
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"path": "/v2/health/ready", "requests": 100, "minSuccessRatio": 0.99}},
        "drill": drill,
    }
    return stack.custom_resource("MCPReadiness", "profile", spec)


def _print(status: dict[str, Any], took_s: float) -> bool:
    kept = True
    print(f"{'stage':10} {'requested':>14} {'achieved':>10} {'P50 ms':>8} {'P99 ms':>8}  client bound")
    for row in status.get("stages") or []:
        requested = float(str(row.get("requested", "0")).split()[0] or 0)
        achieved = float(row.get("achievedRps") or 0)
        bound = row.get("clientBound") or ""
        kept = kept and not bound and abs(achieved - requested) <= RATE_TOLERANCE * requested
        print(
            f"{row['name']:10} {row.get('requested', ''):>14} {achieved:>10.1f} {row.get('p50Ms', ''):>8} "
            f"{row.get('p99Ms', ''):>8}  {bound or 'no'}"
        )
        windows = ", ".join(f"{w['offsetSeconds']:g}s: {w.get('p99Ms')}" for w in row.get("windows") or [])
        print(f"{'':10} windows P99 ms: {windows}")
        if "p99JumpAtSeconds" in row:
            print(f"{'':10} P99 jump at {row['p99JumpAtSeconds']} s")
        print(f"{'':10} load from {row.get('loadFrom', 'the operator')}")
    print("\nKPI board")
    for kpi in status.get("kpis") or []:
        print(f"  {kpi['mark']} {kpi['name']:24} {kpi['measured']:>40}  (limit {kpi['threshold']})")
    print(
        f"\nverdict {status.get('verdict')}, drill took {took_s:.1f} s; rates kept: {'yes' if kept else 'no'}"
    )
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="the profile's rates (1: 500, 3200, 8960 req/s)"
    )
    parser.add_argument(
        "--duration-scale", type=float, default=0.1, help="the profile's durations (0.1: 6, 6, 9 s)"
    )
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--replicas", type=int, default=2, help="reference server pods")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="mcp-drill-profile-") as work,
        stack.operated_cluster(Path(work), REPO / "crds") as cluster,
    ):
        url = _refserver(cluster.kubeconfig, args.replicas)
        started = time.monotonic()
        _kubectl(cluster.kubeconfig, "apply", "-f", "-", input_text=_gate(url, args))
        _kubectl(
            cluster.kubeconfig, "wait", "--for=condition=Complete", "mcpreadiness/profile", "--timeout=600s"
        )
        took = time.monotonic() - started
        obj = json.loads(_kubectl(cluster.kubeconfig, "get", "mcpreadiness", "profile", "-o", "json"))
        print(
            f"MCP2026 at scale {args.scale:g}, durationScale {args.duration_scale:g}, {args.shards} "
            f"shard(s), {args.replicas} reference server pod(s) behind their Service\n"
        )
        return 0 if _print(obj["status"], took) else 1


if __name__ == "__main__":
    sys.exit(main())
