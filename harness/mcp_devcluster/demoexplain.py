"""What the demo prints under its verdict table, so a person is never left with a bare reason:
for every sample that is not a clean Pass, what its reason means in plain words and what to do
(keyed by the Ready condition's reason, with a line per verdict for reasons not listed); then the
commands to explore a kept cluster, or how to keep one.

Pure: status dictionaries (as the API returns them) in, lines of text out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_operator.readiness.drill.kpi import P99_MIN_REQUESTS

SHORT_NAMES = {"MCPReadiness": "mcpr", "MCPBenchmark": "mcpb"}
MESSAGE_CHARS = 300  # the operator's message is quoted up to this; `kubectl describe` has it all
KEEP_HINT = (
    "`make demo KEEP=1` (mcp-devcluster demo --keep) keeps the cluster and the samples for exploring: "
    "kubectl get mcpr, kubectl mcp board, the HTML report"
)


@dataclass(frozen=True)
class Advice:
    """``meaning``: what happened, in plain words; ``todo``: what to do and where to look. Both
    may name ``{short}`` (mcpr, mcpb) and ``{name}`` (the sample)."""

    meaning: str
    todo: str


@dataclass(frozen=True)
class Line:
    """One printed line; a ``command`` (or a path) must never be broken inside a word
    (``command_lines``)."""

    text: str
    command: bool = False


# one shell word: unquoted characters and quoted strings, which may hold spaces
SHELL_WORD = re.compile(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+""")
CONTINUED = " \\"


def command_lines(text: str, width: int) -> list[str]:
    """A command as lines of at most ``width`` columns that paste as the one command: broken only
    between shell words, each line but the last ending in a backslash, the next indented two
    more. A word wider than a line (a long path) stands alone on a line of its own; a terminal
    narrower still folds it, but no line break ever lands inside it."""
    if len(text) <= width:
        return [text]
    indent = text[: len(text) - len(text.lstrip(" "))]
    lines: list[str] = []
    line = ""
    for word in SHELL_WORD.findall(text):
        if line and len(line) + 1 + len(word) + len(CONTINUED) > width:
            lines.append(line + CONTINUED)
            line = ""
        line = f"{line} {word}" if line else (indent if not lines else indent + "  ") + word
    return [*lines, line]


BUSY_MACHINE = "close other programs (or wait until the machine is idle) and run `make demo` again"

EXPLANATIONS: dict[str, Advice] = {
    # -- the load generator and the prober: the machine, not the server ---------------------
    "LoadGeneratorSaturated": Advice(
        "the machine generating the load was too busy (its client process near a full core, or late "
        "on its schedule), not the server: that stage measured the client as much as the server, so "
        "the drill cannot judge it",
        "close other programs or lower spec.drill.scale, then run again; status.stages[].clientBound "
        "says which stage and why",
    ),
    "LoadNotDelivered": Advice(
        "a stage sent fewer requests than its planned rate and time allow (beyond the randomness of "
        "its arrivals), so the server never had the load the drill was to judge it under: the client "
        "was too busy, or the server so slow that arrivals were dropped at the client's in-flight cap",
        "close other programs or lower spec.drill.scale, then run again; the kpi row loadGenerator "
        "says which stage sent how many of its planned requests, status.stages[] the rate reached",
    ),
    "TooFewRequests": Advice(
        f"a stage ran too few requests for a P99 (fewer than {P99_MIN_REQUESTS}: its P99 would be one "
        "slow request), so whether its P99 jumped could not be judged",
        "give the stages more time (spec.drill.durationScale) or rate (spec.drill.scale), then run "
        "again; the kpi row p99JumpPoint names the stages and their counts",
    ),
    "ProberOverloaded": Advice(
        "the operator's own prober ran late (the machine was too busy to run its loop on time), so "
        "the round says nothing about the server",
        f"{BUSY_MACHINE}; the operator evaluates again by itself after a backoff (status.retry); "
        "status.checks[].observed.proberLagP99 against thresholds.maxProberLagP99 "
        "(spec.checks.healthProbe.maxProberLagMs) shows how late",
    ),
    "CheckTimedOut": Advice(
        "a check did not finish in its time: it waited in the operator's queue, or the target was slow",
        f"{BUSY_MACHINE}; the operator evaluates again after a backoff (status.retry)",
    ),
    # -- the target ----------------------------------------------------------------------------
    "TargetUnreachable": Advice(
        "no request reached the server: nothing answers at spec.target.url (the server is not "
        "running, the port is wrong, or something blocks it)",
        "check that the server runs and answers (curl the URL and its health path); in the demo the "
        "reference server's log is in the operator's log directory printed above",
    ),
    "TargetNotHealthy": Advice(
        "the server answered, but not with 2xx on its health path, so the drill injected nothing",
        "check the health path in the spec (spec.checks.healthProbe.path) and that the server is ready",
    ),
    "TargetNotAllowed": Advice(
        "the operator's target policy refuses the address the spec points at",
        "point spec.target at an allowed address, or allow it in the operator's settings (Using it, "
        "docs/using-it.md)",
    ),
    "TargetNotFound": Advice(
        "the Service named in spec.target.serviceRef does not exist",
        "create the Service, or fix spec.target.serviceRef",
    ),
    "TargetMissing": Advice("the spec names no target", "set spec.target.url or spec.target.serviceRef"),
    "TargetUnresolved": Advice(
        "the target's host name does not resolve yet; nothing is dialled until it does",
        "check the name; the operator looks again every few seconds",
    ),
    "TargetUnresolvable": Advice(
        "the target's host name is a cluster name the operator, running outside the cluster, can "
        "never resolve",
        "point spec.target.url at an address this machine reaches, or run the operator in the cluster",
    ),
    "CredentialsInUrl": Advice(
        "the target URL carries a user name or password, which the operator refuses to store",
        "take the credentials out of the URL",
    ),
    # -- what the server did -------------------------------------------------------------------
    "HealthBelowThreshold": Advice(
        "too many health requests failed: the success ratio is below the limit",
        "status.checks[].observed.failures says what failed (timeouts, HTTP codes, refused "
        "connections); fix the server or its capacity (the limit: spec.checks.healthProbe."
        "minSuccessRatio, or spec.drill.kpis.healthSuccessRatio for a drill)",
    ),
    "LatencyAboveThreshold": Advice(
        "the server answered, but slower than the spec allows (P50, P99 or the whole round)",
        "compare status.checks[].observed (p50, p99, round) with thresholds; on a busy machine "
        f"{BUSY_MACHINE}; raise spec.checks.healthProbe.maxP99Ms only if the limit is wrong",
    ),
    "InsufficientSamples": Advice(
        "too few requests to verify the success ratio asked for (0.999 needs at least 1,000), so "
        "nothing was proved either way",
        "raise spec.checks.healthProbe.requests (for a drill: spec.drill.scale, which sets its "
        "length) or lower the ratio asked for",
    ),
    "NoSamples": Advice(
        "no request was measured at all, so nothing was verified",
        "check that the spec asks for requests and that the stages ran (status.stages[]), then run again",
    ),
    "NearThreshold": Advice(
        "a figure is within its limit but inside the warn band",
        "nothing blocks; watch the figure in status.checks[] (a drill: status.kpis[])",
    ),
    "HealthNearThreshold": Advice(
        "the success ratio meets the limit but is inside the warn band",
        "nothing blocks; status.kpis[] (healthSuccessRatio) shows the figure",
    ),
    "P99Jumped": Advice(
        "P99 latency rose past spec.drill.kpis.p99JumpFactor times the last calm stage's (or over 1 % "
        "of a window's requests failed): where the server starts to struggle",
        "a finding, not a failure: status.stages[].p99JumpAtSeconds says when; kubectl mcp board "
        "{name} shows it beside the stages",
    ),
    "AboveThreshold": Advice(
        "a recovery or a hot update took longer than its limit",
        "status.kpis[] (recoverySeconds, hotUpdateSeconds) names the fault and the time",
    ),
    "NeverRecovered": Advice(
        "after a fault the server never answered cleanly again within the drill",
        "status.kpis[] names the fault; status.faults[] has the journal; check the workload",
    ),
    "NotRolledOut": Advice(
        "a hot update never finished rolling out within the drill",
        "status.kpis[] (hotUpdateSeconds) names it; check the workload's rollout",
    ),
    "NoOutageObserved": Advice(
        "a fault was injected but no client saw a failure, so there was no recovery to time",
        "make the fault bite (more replicas hit, a longer hold), or drop the recoverySeconds "
        "expectation for it",
    ),
    # -- the run itself ------------------------------------------------------------------------
    "DrillFailed": Advice(
        "the drill stopped on an error of its own; its faults were reverted",
        "the Ready message and the operator's log (its directory is printed above) say what failed",
    ),
    "DrillInterrupted": Advice(
        "the operator stopped while the drill ran; its faults were reverted",
        "change the spec (or re-apply the sample) to run it again",
    ),
    "DrillAborted": Advice(
        "spec.drill.abort is true: the drill was stopped on purpose and its faults reverted",
        "set spec.drill.abort to false to run it again",
    ),
    "FaultsNotReverted": Advice(
        "an earlier drill's faults are not reverted yet, so this one waits",
        "status.faults[] lists them; the operator keeps retrying the revert",
    ),
    "InternalError": Advice(
        "the operator hit an error it did not expect",
        "the operator's log (its directory is printed above) has the trace; kubectl describe "
        "{short} {name} has the message",
    ),
    "StatusTooLarge": Advice(
        "the status would be larger than the API server stores, so it was cut",
        "fewer checks, stages or faults per resource",
    ),
    "NoChecks": Advice(
        "spec.checks enables no check, so nothing was verified", "enable one, e.g. healthProbe"
    ),
    "InvalidSpec": Advice(
        "the spec was refused: a field is missing or out of range", "the message names the field; fix it"
    ),
    "InvalidCheck": Advice("a check's settings were refused", "the message names the field; fix it"),
    "ImpossibleThreshold": Advice(
        "a threshold no finite probe round can verify (e.g. a success ratio of 1.0)",
        "lower the ratio or raise the number of requests",
    ),
    # -- a benchmark ---------------------------------------------------------------------------
    "SloMissed": Advice(
        "a load level missed the SLO in spec.slo (its P99 or error rate)",
        "status.results[] shows each level's figures; on a busy machine " + BUSY_MACHINE,
    ),
    "ShardsNotConcurrent": Advice(
        "the shards did not run at the same time for long enough, so their figures cannot be added "
        "into one cluster-wide load",
        "the machine was probably too busy to start the shard pods together: " + BUSY_MACHINE,
    ),
    "ShardResultMissing": Advice(
        "a shard pod finished without publishing its result",
        "kubectl get pods and the shard pods' logs (kubectl logs job/JOB, status.jobName) say why",
    ),
    "ShardFailed": Advice(
        "a shard pod was killed (out of memory) before it published its result",
        "raise spec.runner.memoryLimit or lower the load per shard",
    ),
    "ShardResultRejected": Advice(
        "a shard's result was refused (malformed, or from another run)", "the message names the shard"
    ),
    "ShardMergeFailed": Advice(
        "the shards' results could not be merged into one", "the message says what did not match"
    ),
    "NothingMeasured": Advice(
        "no request completed in any shard", "check that the target answers (curl it) and run again"
    ),
    "JobMissing": Advice(
        "the benchmark's Job was deleted before it finished", "re-apply the benchmark to run it again"
    ),
    "ChildRejected": Advice(
        "the API server refused the Job (or another object) the operator creates for the run",
        "the message has the API server's answer (quota, admission policy)",
    ),
    "Unschedulable": Advice(
        "the shard pods cannot be placed on any node",
        "the message says why (selector, taints, resources); check spec.runner.nodeSelector",
    ),
    "NoSchedulableNode": Advice(
        "no node accepts pods (none exists, or all are cordoned)", "add or uncordon a node"
    ),
    "NoNodeMatchesSelector": Advice(
        "no schedulable node has the labels spec.runner.nodeSelector asks for",
        "fix the selector or label a node",
    ),
    "TaintsNotTolerated": Advice(
        "every matching node has a taint the shard pods do not tolerate", "add spec.runner.tolerations"
    ),
    "InsufficientGpu": Advice(
        "no node has the GPUs spec.runner.gpus asks for", "ask for fewer GPUs, or add a GPU node"
    ),
    "QuotaExceeded": Advice(
        "the namespace's ResourceQuota has no room for the shard pods", "raise the quota or lower the load"
    ),
    "NoRunnerImage": Advice(
        "no image to run the shards in", "set spec.runner.image or the operator's MCP_RUNNER_IMAGE"
    ),
    "ServiceAccountMissing": Advice(
        "the ServiceAccount the shard pods run as does not exist", "create it, or fix the spec's name"
    ),
}

# a reason not listed above: what its verdict says in general
BY_VERDICT: dict[str, Advice] = {
    "Warn": Advice(
        "it passed, with a figure near its limit", "nothing blocks; kubectl describe {short} {name} shows it"
    ),
    "Inconclusive": Advice(
        "nothing was proved either way: the measurement could not be trusted or was incomplete (often a "
        "busy machine)",
        f"{BUSY_MACHINE}; kubectl describe {{short}} {{name}} says what was missing",
    ),
    "Fail": Advice(
        "the server was measured and missed a limit in the spec",
        "kubectl describe {short} {name}: the checks or results name the figure and its limit",
    ),
    "Error": Advice(
        "the check could not run (the target, the spec, or the cluster refused it)",
        "kubectl describe {short} {name}: the message says what refused it",
    ),
}
UNKNOWN = Advice("a reason this demo does not know", "kubectl describe {short} {name}, and the message below")
STILL_RUNNING = Advice(
    "no verdict before the demo's time ran out (--timeout): the run was still going, usually because the "
    "machine is slow or busy",
    f"{BUSY_MACHINE}, or give it longer (mcp-devcluster demo --timeout 600); kubectl describe "
    "{short} {name} shows how far it got",
)


def _ready(status: Mapping[str, Any]) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"


def _evidence(status: Mapping[str, Any], reason: str) -> list[str]:
    """Figures from the status that show the cause, where the reason has them."""
    if reason == "LoadGeneratorSaturated":
        return [
            f"stage {s.get('name')}: {s['clientBound']}"
            for s in status.get("stages") or []
            if s.get("clientBound")
        ] + [
            f"{r.get('level')}: {r['clientBound']}"
            for r in status.get("results") or []
            if r.get("clientBound")
        ]
    if reason == "ProberOverloaded":
        return [
            f"{c.get('name')}: prober lag P99 {c['observed']['proberLagP99']} (limit "
            f"{(c.get('thresholds') or {}).get('maxProberLagP99', '?')})"
            for c in status.get("checks") or []
            if (c.get("observed") or {}).get("proberLagP99") and c.get("reason") == reason
        ]
    return []


def advise(kind: str, name: str, status: Mapping[str, Any]) -> list[Line]:
    """What to say under the table about one sample: nothing for a Ready Pass; else, per reason
    (every check at the run's verdict: a drill on a busy machine may be short of samples and
    saturated at once), what it means and what to do, the figures that show it, and the
    operator's own message."""
    ready = _ready(status)
    verdict = str(status.get("verdict") or "")
    if ready.get("status") == "True" and verdict in ("Pass", ""):
        return []
    short = SHORT_NAMES.get(kind, kind.lower())
    reason = str(ready.get("reason") or "")
    if ready.get("status") not in ("True", "False"):
        causes = [(reason or "no verdict", STILL_RUNNING)]
        verdict = verdict or "no verdict"
    elif reason == "ChecksPassedWithWarnings":
        warned = [str(c.get("reason")) for c in status.get("checks") or [] if c.get("verdict") == "Warn"]
        causes = [(r, EXPLANATIONS.get(r, BY_VERDICT["Warn"])) for r in dict.fromkeys(warned)]
        causes = causes or [(reason, BY_VERDICT["Warn"])]
    else:  # every check of this round at the worst verdict: Ready names only the first of them
        worst = [str(c.get("reason")) for c in status.get("checks") or [] if c.get("verdict") == verdict]
        named = [reason, *worst] if reason in worst else [reason or "no reason"]
        causes = [
            (r, EXPLANATIONS.get(r) or BY_VERDICT.get(verdict) or UNKNOWN) for r in dict.fromkeys(named)
        ]
    lines = [Line(f"{kind} {name}: {verdict or 'not Ready'} ({', '.join(r for r, _ in causes)})")]
    for cause, advice in causes:
        prefix = f"{cause}: " if len(causes) > 1 else ""
        lines.append(Line(f"  {prefix}{advice.meaning.format(short=short, name=name)}"))
        lines.append(Line(f"  what to do: {advice.todo.format(short=short, name=name)}"))
        lines.extend(Line(f"    {figure}") for figure in _evidence(status, cause))
    message = str(ready.get("message") or "")
    if message:
        lines.append(Line(f"  the operator says: {_clip(message)}"))
    return lines


@dataclass(frozen=True)
class Exploration:
    """What a kept demo leaves to look at: ``exports`` the shell lines that point kubectl at the
    cluster, one variable (one path) each (none for a configured cluster, which is already the
    current one); ``drill`` the sample the board and the report are best on; ``local`` whether the
    demo started the control plane (then ``make demo-down`` stops it); ``samples`` the kept
    samples as kubectl names them (``mcpr/NAME mcpb/NAME``), to delete from a configured cluster."""

    exports: tuple[str, ...]
    drill: str
    local: bool
    samples: str = ""


def next_steps(explore: Exploration | None) -> list[Line]:
    """After the table: the next three commands for a kept cluster, and the way out; otherwise
    the one line that says how to keep it."""
    if explore is None:
        return [Line(KEEP_HINT)]
    lines = [
        Line("the cluster is kept (the operator and the reference server are stopped; the verdicts stay):")
    ]
    lines += [Line(f"  {export}", command=True) for export in explore.exports]
    lines += [
        Line("  kubectl get mcpr,mcpb", command=True),
        Line(f"  kubectl mcp board {explore.drill}", command=True),
        Line(f"  mcp-operator report {explore.drill} --kind mcpr -o {explore.drill}.html", command=True),
    ]
    if explore.local:
        lines.append(Line("stop it with: make demo-down (mcp-devcluster down on the demo's state directory)"))
    elif explore.samples:
        lines += [Line("remove the samples with:"), Line(f"  kubectl delete {explore.samples}", command=True)]
    return lines
