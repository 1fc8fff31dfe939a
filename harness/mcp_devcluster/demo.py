"""``mcp-devcluster demo`` (``make demo``): the main job on an embedded default.

Uses the configured cluster when there is one that answers; otherwise builds (first time)
and starts the local control plane. Then it installs the CRDs, starts the reference server
and the operator, applies every sample in ``manifests/samples/``, waits for each verdict and
prints them as a table. Exit code 0 only when every sample is Ready.

``--target vllm`` runs the same samples against a real vLLM instead of the reference server
(:mod:`mcp_devcluster.vllm`: vLLM's CPU build serving a tiny random-weight model, installed on
first use into the user cache): each sample's URL, model and health path are pointed at it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from . import stack, vllm
from .cluster import DevCluster
from .nodespec import SimulatedNode

TARGETS = ("refserver", "vllm")
# the samples run on the local nodes: the demo starts no simulated (kwok) node, so it builds no kwok
DEMO_SIMULATED_NODES: list[SimulatedNode] = []
SAMPLE_MODEL = "refmodel"  # the model the samples name: the reference server's

console = Console(stderr=True)


@dataclass
class SampleOutcome:
    kind: str
    name: str
    ready: str
    verdict: str
    reason: str
    figures: str
    seconds: float


def configured_kubeconfig() -> Path | None:
    """The user's kubeconfig when it points at a cluster that answers, else None."""
    candidate = Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    if not candidate.is_file():
        return None
    result = stack.kubectl(candidate, "version", "--request-timeout=5s", check=False, timeout=20)
    return candidate if result.returncode == 0 else None


def _figures(kind: str, status: dict[str, Any]) -> str:
    if kind == "MCPReadiness":
        kpis = [f"{k['mark']} {k['name']} {k['measured']}" for k in status.get("kpis") or []]
        rows = [r for r in status.get("checks") or [] if not r["name"].startswith("kpi:")]
        return "; ".join(
            kpis
            + [
                f"{r['name']}: "
                + ", ".join(
                    f"{k}={v}"
                    for k, v in r.get("observed", {}).items()
                    if k in ("p50", "p99", "successRatio")
                )
                for r in rows
            ]
        )
    rows = status.get("results") or []
    return "; ".join(f"{r['level']}: P99 {r['p99Ms']} ms, {r['throughputRps']} rps" for r in rows)


def wait_verdict(kubeconfig: Path, kind: str, name: str, namespace: str, timeout_s: float) -> dict[str, Any]:
    """Poll until the Ready condition is True or False for the current generation."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = stack.kubectl(kubeconfig, "get", kind.lower(), name, "-n", namespace, "-o", "json").stdout
        obj = json.loads(out)
        status = obj.get("status") or {}
        ready = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
        if (
            ready
            and ready.get("status") in ("True", "False")
            and ready.get("observedGeneration") == obj["metadata"]["generation"]
        ):
            return obj
        if time.monotonic() > deadline:
            return obj
        time.sleep(0.5)


def print_table(outcomes: list[SampleOutcome], target: str = "refserver") -> None:
    title = "mcp-operator verdicts" + (" (target: real vLLM)" if target == "vllm" else "")
    table = Table(title=title)
    for column in ("Kind", "Name", "Ready", "Verdict", "Reason", "Key figures", "Apply→verdict"):
        table.add_column(column)
    for o in outcomes:
        style = "green" if o.ready == "True" else "red"
        table.add_row(
            o.kind, o.name, f"[{style}]{o.ready}[/]", o.verdict, o.reason, o.figures, f"{o.seconds:.1f}s"
        )
    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    out.print(table)


def run_demo(samples: Path, keep: bool, timeout_s: float, target: str = "refserver") -> int:
    if target not in TARGETS:
        raise ValueError(f"demo target must be one of {TARGETS}, got {target!r}")
    cluster: DevCluster | None = None
    operator: stack.OperatorProcess | None = None
    refserver = None
    vllm_server = None
    work = Path(tempfile.mkdtemp(prefix="mcp-demo-"))
    kubeconfig = configured_kubeconfig()
    try:
        if kubeconfig is None:
            console.print("no cluster configured: starting the local control plane (first run builds it)")
            cluster = DevCluster(nodes=DEMO_SIMULATED_NODES)
            state = cluster.up()
            kubeconfig = Path(state.kubeconfig)
            console.print(f"control plane ready in {state.startup_seconds['total']:.1f}s ({kubeconfig})")
        else:
            console.print(f"using the configured cluster ({kubeconfig})")
        crd_dir = Path(__file__).resolve().parents[2] / "crds"  # the repository's, when run from it
        stack.apply_crds(kubeconfig, crd_dir if crd_dir.is_dir() else Path("crds"))
        render: Callable[[str], str]
        if target == "vllm":
            console.print(f"starting vLLM {vllm.VLLM_VERSION} (CPU build; the first run installs it, ~2 min)")
            vllm_server = vllm.start_vllm(work)
            served = vllm_server
            url = served.url
            console.print(
                f"vLLM serving {served.model} at {url} (install {served.install_s:.0f}s, "
                f"start {served.startup_s:.0f}s)"
            )

            def render(text: str) -> str:
                return vllm.render_for_vllm(text, served, stack.SAMPLE_URL, SAMPLE_MODEL)

        else:
            refserver, url = stack.start_refserver(work, "--ttft-ms", "5", "--tpot-ms", "1")
            console.print(f"reference server at {url}")

            def render(text: str) -> str:
                return stack.render_sample(text, url)

        operator = stack.start_operator(kubeconfig, work)
        console.print(f"operator running (logs in {work})")
        outcomes = [
            apply_and_wait(kubeconfig, path, render, timeout_s) for path in sorted(samples.glob("*.yaml"))
        ]
        print_table(outcomes, target)
        for path in sorted(samples.glob("*.yaml")):
            stack.kubectl(
                kubeconfig,
                "delete",
                "-f",
                "-",
                "--wait=false",
                "--ignore-not-found",
                input_text=render(path.read_text()),
                check=False,
            )
        return 0 if outcomes and all(o.ready == "True" for o in outcomes) else 1
    finally:
        stack.stop(operator.process if operator else None)
        stack.stop(refserver)
        vllm.stop_vllm(vllm_server)
        if cluster is not None and not keep:
            cluster.down()


def apply_and_wait(
    kubeconfig: Path, path: Path, render: Callable[[str], str], timeout_s: float
) -> SampleOutcome:
    text = render(path.read_text())
    doc = yaml.safe_load(text)
    kind, name = doc["kind"], doc["metadata"]["name"]
    namespace = doc["metadata"].get("namespace", "default")
    stack.kubectl(
        kubeconfig, "delete", kind.lower(), name, "-n", namespace, "--ignore-not-found", "--wait=true"
    )
    started = time.monotonic()
    stack.kubectl(kubeconfig, "apply", "-f", "-", input_text=text)
    obj = wait_verdict(kubeconfig, kind, name, namespace, timeout_s)
    elapsed = time.monotonic() - started
    status = obj.get("status") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), {})
    return SampleOutcome(
        kind=kind,
        name=name,
        ready=ready.get("status", "Unknown"),
        verdict=status.get("verdict", "-"),
        reason=ready.get("reason", "Timeout"),
        figures=_figures(kind, status),
        seconds=elapsed,
    )
