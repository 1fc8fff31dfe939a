"""``mcp-devcluster demo`` (``make demo``): the main job on an embedded default.

Uses the configured cluster when there is one that answers; otherwise builds (first time)
and starts the local control plane. Then it installs the CRDs, starts the reference server
and the operator, applies every sample in ``manifests/samples/``, waits for each verdict and
prints them as a table, with a plain-words explanation of every sample that is not a clean
Pass (:mod:`mcp_devcluster.demoexplain`). Exit code 0 only when every sample is Ready.

The local control plane runs from a state directory of its own (``demo_state_dir``), so a kept
demo (``--keep``, ``make demo KEEP=1``) and the quick start's ``mcp-devcluster up`` do not meet;
``make demo-down`` stops it. A kept demo leaves the samples and their verdicts to explore.

``--target vllm`` runs the same samples against a real vLLM instead of the reference server
(:mod:`mcp_devcluster.vllm`: vLLM's CPU build serving a tiny random-weight model, installed on
first use into the user cache): each sample's URL, model and health path are pointed at it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from mcp_operator.board.marks import mark

from . import build, buildnotice, stack, vllm
from .cluster import DevCluster
from .demoexplain import SHORT_NAMES, Exploration, Line, advise, command_lines, next_steps
from .nodespec import SimulatedNode

TARGETS = ("refserver", "vllm")
# the samples run on the local nodes: the demo starts no simulated (kwok) node, so it builds no kwok
DEMO_SIMULATED_NODES: list[SimulatedNode] = []
SAMPLE_MODEL = "refmodel"  # the model the samples name: the reference server's
# the verdicts a busy machine may give a drill: its load generator's doing, never the server's
BUSY_MACHINE = frozenset({("Inconclusive", "LoadGeneratorSaturated"), ("Inconclusive", "LoadNotDelivered")})

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
    status: dict[str, Any] = field(default_factory=dict)  # as the API returned it, for the advice
    drill: bool = False  # an MCPReadiness with spec.drill: the board and the report show it best

    @property
    def busy_machine(self) -> bool:
        """A drill the machine's load left undecided (BUSY_MACHINE): not a finding about the
        server, and not a Pass either; the demo still exits 1 on it and says to run it again."""
        return self.drill and (self.verdict, self.reason) in BUSY_MACHINE


def demo_state_dir() -> Path:
    """Where the demo's local control plane runs from: not the default directory, which the quick
    start's ``mcp-devcluster up`` uses (``make demo-down`` reads it from here)."""
    return build.cache_root() / "clusters" / "demo"


def configured_kubeconfig() -> Path | None:
    """The user's kubeconfig when it points at a cluster that answers, else None."""
    candidate = Path(os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    if not candidate.is_file():
        return None
    result = stack.kubectl(candidate, "version", "--request-timeout=5s", check=False, timeout=20)
    return candidate if result.returncode == 0 else None


def _figures(kind: str, status: dict[str, Any]) -> str:
    if kind == "MCPReadiness":
        # the board's marks, by the verdict: no emoji font needed, one column wide
        kpis = [f"{mark(k.get('verdict'))} {k['name']} {k['measured']}" for k in status.get("kpis") or []]
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


def _stdout() -> Console:
    out = Console()
    return out if out.is_terminal else Console(width=160)


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
    _stdout().print(table)


def print_lines(lines: list[Line], out: Console | None = None) -> None:
    """Prose wraps at words under its indent; a command breaks only between its words, with a
    backslash (``command_lines``): a path is never broken, a long one stands on a line of its own."""
    out = out or _stdout()
    for line in lines:
        if line.command:
            for part in command_lines(line.text, out.width):
                out.print(part, markup=False, highlight=False, soft_wrap=True)
        else:  # wrapped lines keep the line's indent
            indent = " " * (len(line.text) - len(line.text.lstrip(" ")))
            wrapped = textwrap.fill(
                line.text.strip(),
                width=out.width,
                initial_indent=indent,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
            out.print(wrapped, markup=False, highlight=False, soft_wrap=True)


def print_advice(outcomes: list[SampleOutcome], explore: Exploration | None) -> None:
    """Under the table: why each sample that is not a clean Pass ended as it did and what to do,
    then what to explore next (or how to keep the cluster for it)."""
    advice = [line for o in outcomes for line in advise(o.kind, o.name, o.status)]
    if advice:
        print_lines([Line("why, and what to do:"), *advice])
    print_lines(next_steps(explore))


def exploration(outcomes: list[SampleOutcome], kubeconfig: Path, local: bool) -> Exploration:
    """What a kept demo points the user at: its cluster's kubeconfig and kubectl (the one built
    beside the API server, first on PATH) and this environment's ``kubectl-mcp`` and
    ``mcp-operator`` on PATH; one export per path, so each fits a line of its own."""
    readiness = [o for o in outcomes if o.kind == "MCPReadiness"]
    drill = next((o.name for o in readiness if o.drill), readiness[0].name if readiness else "NAME")
    exports: tuple[str, ...] = ()
    if local:
        kubectl_dir = build.components()["kubernetes"].binary("kubectl").parent
        venv_bin = Path(sys.executable).parent
        exports = (
            f"export KUBECONFIG={shlex.quote(str(kubeconfig))}",
            f'export PATH={shlex.quote(str(venv_bin))}:"$PATH"',
            f'export PATH={shlex.quote(str(kubectl_dir))}:"$PATH"',
        )
    names = " ".join(f"{SHORT_NAMES.get(o.kind, o.kind.lower())}/{o.name}" for o in outcomes)
    return Exploration(exports=exports, drill=drill, local=local, samples=names)


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
            local = DevCluster(demo_state_dir(), nodes=DEMO_SIMULATED_NODES)
            to_build = buildnotice.announcement(local.components)
            console.print(
                "no cluster configured: starting the local control plane"
                + (" (first run builds it)" if to_build else "")
            )
            if to_build:
                print_lines([Line(to_build)], console)
            state = local.up()  # refuses a state directory another demo's cluster still runs from
            cluster = local  # only now ours to stop
            kubeconfig = Path(state.kubeconfig)
            console.print(f"control plane ready in {state.startup_seconds['total']:.1f}s; its kubeconfig:")
        else:
            console.print("using the configured cluster, kubeconfig:")
        print_lines([Line(f"  {kubeconfig}", command=True)], console)  # the path on a line of its own
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
        print_lines([Line(f"operator running (its log and the reference server's in {work})")], console)
        outcomes = [
            apply_and_wait(kubeconfig, path, render, timeout_s) for path in sorted(samples.glob("*.yaml"))
        ]
        print_table(outcomes, target)
        print_advice(outcomes, exploration(outcomes, kubeconfig, cluster is not None) if keep else None)
        if keep:  # left to explore: kubectl get mcpr, the board, the report
            return _exit_code(outcomes)
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
        return _exit_code(outcomes)
    finally:
        stack.stop(operator.process if operator else None)
        stack.stop(refserver)
        vllm.stop_vllm(vllm_server)
        if cluster is not None and not keep:
            cluster.down()


def _exit_code(outcomes: list[SampleOutcome]) -> int:
    return 0 if outcomes and all(o.ready == "True" for o in outcomes) else 1


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
        status=status,
        drill=kind == "MCPReadiness" and bool((doc.get("spec") or {}).get("drill")),
    )
