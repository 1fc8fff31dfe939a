"""The words under the demo's verdict table: every sample that is not a clean Pass is explained by
its reason, on statuses built by the operator's own builders (so a changed status shape shows
here), and every reason the code behind the demo's samples can write has an explanation."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import re
import shlex
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tests.operator.drillstatus import SPEC, benchmark_object, readiness_object

from mcp_checks.health import HealthProbeSpec, ProbeSamples, evaluate
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_devcluster import build, buildnotice
from mcp_devcluster.cluster import default_state_dir
from mcp_devcluster.demo import BUSY_MACHINE, SampleOutcome, demo_state_dir, exploration, print_lines
from mcp_devcluster.demoexplain import (
    BY_VERDICT,
    EXPLANATIONS,
    KEEP_HINT,
    STILL_RUNNING,
    Exploration,
    Line,
    advise,
    command_lines,
    next_steps,
)
from mcp_operator.readiness.drill.kpi import board
from mcp_operator.readiness.drill.load import StageFigures, WindowFigures
from mcp_operator.readiness.status import drill_status, running_status, verdict_status

URL = "http://127.0.0.1:18080"
STARTED = "2026-05-01T12:00:00.000Z"
DONE = "2026-05-01T12:01:00.000Z"
LAG = "worker 0: schedule lag P99 16.5 ms > 10 ms"


def text(lines: list[Line]) -> str:
    return "\n".join(line.text for line in lines)


def checked_status(*outcomes: CheckOutcome) -> dict[str, Any]:
    """An MCPReadiness status after one evaluation, as the operator writes it."""
    running = running_status([], 1, URL, STARTED)
    status, _ = verdict_status(running, 1, URL, STARTED, list(outcomes), DONE)
    return readiness_object("refserver-ready", {**running, **status})["status"]


def probe(samples: ProbeSamples, **spec: Any) -> CheckOutcome:
    return evaluate(HealthProbeSpec(url=URL + "/v2/health/ready", **spec), samples)


def stage(rate: float, client_bound: tuple[str, ...] = (), p99: float = 3.0) -> StageFigures:
    """Ten seconds at ``rate``; with ``client_bound``, the client was busy over its one window."""
    completed = int(rate * 10)
    return StageFigures(
        requested=f"{rate:g} req/s",
        achieved_rps=rate,
        p50_ms=1.0,
        p99_ms=p99,
        completed=completed,
        errors=0,
        windows=(WindowFigures(0.0, p99, completed, 0, client_busy=bool(client_bound)),),
        sent=completed,
        client_bound=client_bound,
    )


def saturated_drill(*figures: tuple[str, StageFigures]) -> dict[str, Any]:
    """The demo's drill on a busy machine: by default every KPI met but the mixed stage's client
    lagged, and its P99 jumped with it (so the jump may be the client's)."""
    figures = figures or (
        ("baseline", stage(400)),
        ("mixed", stage(2000, (LAG,), p99=20.0)),
        ("spike", stage(2000)),
    )
    ok = sum(f.completed for _, f in figures)
    rows = board(ok=ok, total=ok, stages=figures, recoveries=[], hot_updates=[], thresholds=SPEC.kpis)
    stages = [
        {
            "name": name,
            "phase": "Done",
            "requested": f.requested,
            "achievedRps": f"{f.achieved_rps:.1f}",
            "p99Ms": f"{f.p99_ms:.2f}",
            **({"clientBound": "; ".join(f.client_bound)} if f.client_bound else {}),
        }
        for name, f in figures
    ]
    drill = type("Drill", (), {"stages": stages, "kpis": [r.to_wire() for r in rows], "journal": []})()
    drill.reverted = True
    running = running_status([], 1, URL, STARTED)
    status, _ = verdict_status(running, 1, URL, STARTED, [r.outcome() for r in rows], DONE)
    status = {**running, **status, **drill_status(drill, status["conditions"], 1, DONE)}
    return readiness_object("refserver-drill", status)["status"]


def test_a_saturated_load_generator_is_blamed_on_the_machine_with_the_stage_that_said_so() -> None:
    status = saturated_drill()
    said = text(advise("MCPReadiness", "refserver-drill", status))
    assert said.startswith("MCPReadiness refserver-drill: Inconclusive (LoadGeneratorSaturated)")
    assert "the machine generating the load was too busy" in said and "not the server" in said
    assert "lower spec.drill.scale" in said and "status.stages[].clientBound" in said
    assert f"stage mixed: {LAG}" in said  # the figure itself, from status.stages[]
    assert "stage baseline" not in said


def test_every_check_at_the_worst_verdict_is_explained_not_only_the_one_ready_names() -> None:
    short = saturated_drill(
        ("baseline", stage(10)), ("mixed", stage(64, (LAG,), p99=20.0)), ("spike", stage(64))
    )
    said = text(advise("MCPReadiness", "refserver-drill", short))
    assert "Inconclusive (InsufficientSamples, LoadGeneratorSaturated)" in said
    assert "InsufficientSamples: too few requests" in said and "LoadGeneratorSaturated: the machine" in said


def test_an_overloaded_prober_says_the_round_proves_nothing_and_how_late_it_was() -> None:
    samples = ProbeSamples(latencies_ms=[400.0] * 2000)
    samples.lag.samples_ms.extend([300.0] * 50)
    outcome = probe(samples, min_success_ratio=0.999, max_p99_ms=250)
    assert outcome.reason == "ProberOverloaded"
    said = text(advise("MCPReadiness", "refserver-ready", checked_status(outcome)))
    assert "Inconclusive (ProberOverloaded)" in said
    assert "prober ran late" in said and "close other programs" in said
    assert "health-probe: prober lag P99 300.00ms (limit 25.00ms)" in said


@pytest.mark.parametrize(
    ("samples", "spec", "reason", "words"),
    [
        (
            ProbeSamples(failures=Counter(connect=2000)),
            {},
            "TargetUnreachable",
            "no request reached the server",
        ),
        (
            ProbeSamples(latencies_ms=[2.0] * 100),
            {"min_success_ratio": 0.999},
            "InsufficientSamples",
            "raise spec.checks.healthProbe.requests",
        ),
        (
            ProbeSamples(latencies_ms=[2.0] * 900, failures=Counter(http_503=100)),
            {"min_success_ratio": 0.999},
            "HealthBelowThreshold",
            "status.checks[].observed.failures",
        ),
    ],
)
def test_a_health_probe_that_did_not_pass_is_explained_by_its_reason(
    samples: ProbeSamples, spec: dict[str, Any], reason: str, words: str
) -> None:
    outcome = probe(samples, **spec)
    assert outcome.reason == reason
    status = checked_status(outcome)
    said = text(advise("MCPReadiness", "refserver-ready", status))
    assert f"{status['verdict']} ({reason})" in said and words in said
    assert "the operator says: health-probe:" in said  # the status message, quoted


def test_a_clean_pass_says_nothing_and_a_warning_is_explained_by_its_checks() -> None:
    passed = probe(ProbeSamples(latencies_ms=[2.0] * 2000), min_success_ratio=0.999)
    assert advise("MCPReadiness", "refserver-ready", checked_status(passed)) == []
    near = probe(ProbeSamples(latencies_ms=[2.0] * 2000), min_success_ratio=0.999, warn_p99_ms=1.0)
    said = text(advise("MCPReadiness", "refserver-ready", checked_status(near)))
    assert "Warn (NearThreshold)" in said and "inside the warn band" in said


def test_a_sample_still_running_when_the_demo_gave_up_is_said_to_have_run_out_of_time() -> None:
    status = readiness_object("refserver-drill", running_status([], 1, URL, STARTED))["status"]
    said = text(advise("MCPReadiness", "refserver-drill", status))
    assert "no verdict (Evaluating)" in said and "time ran out" in said
    assert "kubectl describe mcpr refserver-drill" in said
    assert text(advise("MCPBenchmark", "refserver-bench", {})).startswith(
        "MCPBenchmark refserver-bench: no verdict (no verdict)"
    )


def test_an_unknown_reason_gets_its_verdict_in_general_and_names_describe_and_the_message() -> None:
    odd = CheckOutcome("health-probe", Verdict.FAIL, "SomethingNew", "P42 was 7 parsecs")
    said = text(advise("MCPReadiness", "refserver-ready", checked_status(odd)))
    assert "Fail (SomethingNew)" in said and BY_VERDICT["Fail"].meaning in said
    assert "kubectl describe mcpr refserver-ready" in said
    assert "the operator says: health-probe: P42 was 7 parsecs" in said


def test_a_benchmark_that_missed_its_slo_names_its_results_and_describe_uses_mcpb() -> None:
    status = benchmark_object(slo_met=False)["status"]
    said = text(advise("MCPBenchmark", "refserver-bench", status))
    assert "Fail (SloMissed)" in said and "missed the SLO" in said and "status.results[]" in said
    status["conditions"][0]["reason"] = "NewBenchReason"
    assert "kubectl describe mcpb refserver-bench" in text(advise("MCPBenchmark", "refserver-bench", status))


# -- every reason behind the demo's samples ---------------------------------------------------

# the modules whose reasons can end up on a demo sample's Ready condition: the health probe and
# the verdict, the readiness round and its drill without faults, the benchmark run, a spec refused
SAMPLE_MODULES = (
    "mcp_checks.health",
    "mcp_checks.verdict",
    "mcp_operator.readiness.evaluate",
    "mcp_operator.readiness.change",
    "mcp_operator.readiness.status",
    "mcp_operator.readiness.retry",
    "mcp_operator.readiness.round",
    "mcp_operator.readiness.drills",
    "mcp_operator.readiness.drill.kpi",
    "mcp_operator.readiness.drill.preflight",
    "mcp_operator.benchmark.status",
    "mcp_operator.benchmark.preflight",
    "mcp_operator.benchmark.start",
    "mcp_operator.targets",
    "mcp_operator.targets.unresolved",
)
# where a reason goes: the positional index of the reason in each builder's call
REASON_ARGUMENT = {
    "CheckOutcome": 2,
    "KpiResult": 2,
    "SpecProblem": 0,
    "RunVerdict": 3,
    "outcome": 1,  # health's own builder of its check's outcome
    "seconds_kpi": 4,  # its reason when the time was never reached
    "set_condition": 3,  # only where the condition is Ready
    "replace": None,  # dataclasses.replace(row, reason=...)
}
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*$")
# reasons that need no words: a pass (never a Ready False reason), a run still going (said by
# STILL_RUNNING), a Warn (said per warning check)
NEEDS_NO_ENTRY = {
    "ChecksPassed",
    "HealthProbePassed",
    "HealthMet",
    "ClientKeptUp",
    "ClientBusyFindingsStand",
    "NoJump",
    "WithinThreshold",
    "SloMet",
    "Measured",
    "Evaluating",
    "Running",
    "ChecksPassedWithWarnings",
}


def _values(node: ast.expr | None, module: Any) -> Iterator[str]:
    """The strings an expression can be: a literal, a module constant, either branch of an if."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), str):
        yield getattr(module, node.id)
    elif isinstance(node, ast.IfExp):
        yield from _values(node.body, module)
        yield from _values(node.orelse, module)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _values(value, module)
    elif isinstance(node, ast.Tuple) and node.elts:  # (reason, message)
        yield from _values(node.elts[0], module)


def _is_reason_pair(node: ast.Tuple, module: Any) -> bool:
    """``("ShardMergeFailed", str(exc))``: a CamelCase word (or an if between two, constants
    included) and a message built from something."""
    if len(node.elts) != 2 or not isinstance(node.elts[0], ast.Constant | ast.IfExp):
        return False
    words = list(_values(node.elts[0], module))
    return (
        bool(words)
        and all(CAMEL.match(w) for w in words)
        and isinstance(node.elts[1], ast.JoinedStr | ast.Call | ast.BinOp)
    )


def reasons_written(module_name: str) -> set[str]:
    """Every reason the module passes to a reason-carrying builder, assigns to ``reason`` or
    returns as a (reason, message) pair."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if called not in REASON_ARGUMENT:
                continue
            if called == "set_condition" and not (
                len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "Ready"
            ):
                continue
            index = REASON_ARGUMENT[called]
            if index is not None and len(node.args) > index:
                found.update(_values(node.args[index], module))
            for keyword in node.keywords:
                if keyword.arg == "reason":
                    found.update(_values(keyword.value, module))
        elif isinstance(node, ast.Assign):
            target = node.targets[0]
            first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
            if isinstance(first, ast.Name) and first.id == "reason":
                found.update(_values(node.value, module))
        elif isinstance(node, ast.Tuple) and _is_reason_pair(node, module):
            found.update(_values(node, module))
    return {r for r in found if CAMEL.match(r)}


def test_the_reason_scan_finds_the_reasons_it_must() -> None:
    """The scan itself, on reasons each kind of site writes: a builder's argument, a constant,
    an if, a (reason, message) pair, a ``replace``."""
    assert {"ProberOverloaded", "TargetUnreachable"} <= reasons_written("mcp_checks.health")
    assert {"LoadGeneratorSaturated", "NoOutageObserved", "NeverRecovered"} <= reasons_written(
        "mcp_operator.readiness.drill.kpi"
    )
    assert {"DrillAborted", "DrillInterrupted", "FaultsNotReverted"} <= reasons_written(
        "mcp_operator.readiness.drills"
    )
    assert {"ShardResultRejected", "ShardMergeFailed", "ShardFailed", "SloMissed"} <= reasons_written(
        "mcp_operator.benchmark.status"
    )
    assert {"Unschedulable", "NoRunnerImage"} <= reasons_written("mcp_operator.benchmark.preflight")


@pytest.mark.parametrize("module_name", SAMPLE_MODULES)
def test_every_reason_a_demo_sample_can_end_with_has_plain_words(module_name: str) -> None:
    unexplained = reasons_written(module_name) - set(EXPLANATIONS) - NEEDS_NO_ENTRY
    assert not unexplained, f"{module_name} writes reasons the demo does not explain: {sorted(unexplained)}"


def test_every_explanation_says_what_it_means_and_what_to_do() -> None:
    for reason, advice in [*EXPLANATIONS.items(), *BY_VERDICT.items(), ("still running", STILL_RUNNING)]:
        assert len(advice.meaning) > 20 and len(advice.todo) > 10, reason
        advice.todo.format(short="mcpr", name="x")  # every placeholder is one advise fills


# -- after the table ----------------------------------------------------------------------------


def test_a_kept_local_cluster_gets_the_next_three_commands_and_the_way_out() -> None:
    exports = (
        "export KUBECONFIG=/c/demo/kubeconfig",
        'export PATH=/v/bin:"$PATH"',
        'export PATH=/c/bin:"$PATH"',
    )
    lines = next_steps(Exploration(exports=exports, drill="refserver-drill", local=True))
    commands = [line.text.strip() for line in lines if line.command]
    assert commands == [
        *exports,
        "kubectl get mcpr,mcpb",
        "kubectl mcp board refserver-drill",
        "mcp-operator report refserver-drill --kind mcpr -o refserver-drill.html",
    ]
    assert "make demo-down" in text(lines) and KEEP_HINT not in text(lines)


def test_a_kept_local_demo_exports_one_path_a_line_with_its_kubectl_first_on_path() -> None:
    drill = SampleOutcome(
        "MCPReadiness", "refserver-drill", "True", "Pass", "ChecksPassed", "", 1.0, drill=True
    )
    explore = exploration([drill], Path("/c/demo/kubeconfig"), local=True)
    assigned = [shlex.split(export)[1].split("=", 1) for export in explore.exports]
    assert [name for name, _ in assigned] == ["KUBECONFIG", "PATH", "PATH"]
    assert assigned[0][1] == "/c/demo/kubeconfig" and explore.drill == "refserver-drill"
    kubectl = build.components()["kubernetes"].binary("kubectl")
    assert assigned[-1][1] == f"{kubectl.parent}:$PATH"  # exported last: first on PATH
    assert all(len(path.split(":")) == 2 for _, path in assigned[1:])  # one directory each


def test_a_kept_configured_cluster_is_not_stopped_but_its_samples_can_be_deleted() -> None:
    explore = Exploration(exports=(), drill="d", local=False, samples="mcpr/d mcpb/b")
    said = text(next_steps(explore))
    assert "make demo-down" not in said and "kubectl delete mcpr/d mcpb/b" in said
    assert "export KUBECONFIG" not in said


def test_without_keep_the_demo_says_once_how_to_keep_the_cluster() -> None:
    assert next_steps(None) == [Line(KEEP_HINT)]
    assert "make demo KEEP=1" in KEEP_HINT


def test_a_command_breaks_only_between_its_words_and_prose_wraps_at_words() -> None:
    """At 80 columns a kubeconfig path of a long home directory stands on a line of its own (the
    issue: it wrapped onto a second line mid-path); the lines paste as the one command."""
    sink = io.StringIO()
    path = "/home/long-username/.cache/mcp-operator/clusters/demo/kubeconfig"  # 84 columns after export
    report = "mcp-operator report refserver-drill --kind mcpr -o 'the refserver drill, kept.html'"
    prose = f"the machine generating the load was too busy, not the server; its log is in {path}"
    commands = [Line(f"  export KUBECONFIG={path}", command=True), Line(f"  {report}", command=True)]
    lines = [*commands, Line(prose)]
    print_lines(lines, Console(file=sink, width=80))
    out = sink.getvalue().splitlines()
    assert out[:2] == ["  export \\", f"    KUBECONFIG={path}"]
    assert out[2].endswith(" \\") and out[3].startswith("    ")
    assert shlex.split(" ".join(out[2:4]).replace(" \\ ", " ")) == shlex.split(report)
    assert all(len(line) <= 80 for line in out) and path in out[-1].split()
    assert " ".join(out[4:]).split() == prose.split()
    assert command_lines("  kubectl get mcpr,mcpb", 80) == ["  kubectl get mcpr,mcpb"]  # it fits: as it is


def test_the_demo_runs_from_a_state_directory_of_its_own() -> None:
    assert demo_state_dir() != default_state_dir() and demo_state_dir().name == "demo"


def test_the_build_line_is_printed_only_when_something_will_be_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path))
    line = buildnotice.announcement(["kubernetes", "etcd"], together=True)
    assert line is not None and "kubernetes (the API server" in line and "about 5-7 min" in line
    assert "etcd (" in line and "side by side" in line
    from mcp_devcluster import build

    stamp = build.components()["kubernetes"].bin_dir / build.STAMP
    stamp.parent.mkdir(parents=True)
    stamp.touch()
    assert buildnotice.missing(["kubernetes", "etcd"]) == ["etcd"]
    assert "kubernetes" not in (buildnotice.announcement(["kubernetes", "etcd"]) or "")
    etcd = build.components()["etcd"].bin_dir / build.STAMP
    etcd.parent.mkdir(parents=True)
    etcd.touch()
    assert buildnotice.announcement(["kubernetes", "etcd"]) is None


def test_only_a_drill_its_load_generator_left_inconclusive_is_the_busy_machines_doing() -> None:
    """The e2e tests forgive these verdicts of a busy machine, and only these: not another reason,
    not another verdict, not a gate without a drill. Each is a reason the drill's KPIs write."""
    saturated = SampleOutcome(
        "MCPReadiness", "d", "False", "Inconclusive", "LoadGeneratorSaturated", "", 1.0, drill=True
    )
    assert saturated.busy_machine
    assert dataclasses.replace(saturated, reason="LoadNotDelivered").busy_machine
    assert not dataclasses.replace(saturated, drill=False).busy_machine
    assert not dataclasses.replace(saturated, reason="HealthProbeFailed").busy_machine
    assert not dataclasses.replace(saturated, verdict="Fail").busy_machine
    assert {reason for _, reason in BUSY_MACHINE} <= reasons_written("mcp_operator.readiness.drill.kpi")
