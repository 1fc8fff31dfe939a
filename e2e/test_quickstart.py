"""The README's quick start, as a user runs it: its own text, and a deployed reference server.

``test_the_readmes_quick_start_runs_as_written`` reads the quick-start block from README.md
(``mcp_devcluster.readme``) and runs its commands in one bash process, in a fresh user's
environment, against a control plane of its own; it asserts what the user sees and that the last
line leaves nothing running. ``test_the_quick_start_drill_reaches_a_verdict_...`` walks the same
steps on the shared control plane and checks what the printed tables cannot show: the drill's
load reached both pods through the Service."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_devcluster import build, demo, readme, stack
from mcp_devcluster.cluster import ClusterState
from mcp_devcluster.podnet import loopback_twin
from mcp_devcluster.processes import running

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "manifests" / "refserver"
COUNTER = "mcp_refserver_http_requests_total"
KPIS = ("healthSuccessRatio", "p99JumpPoint", "loadGenerator")
STAGES = ("baseline", "mixed", "spike")
RUN_LIMIT_S = 300  # the whole block; about 1 to 2 minutes on an idle 2-core machine
DOWN_LIMIT_S = 120
MARK = "@@quickstart"

# The README's text changes only here: (what, into what, why). Each must match one command.
SUBSTITUTIONS = (
    (
        "mcp-devcluster up --local-only",
        "mcp-devcluster up --local-only --state-dir {state}",
        "a state directory of its own: the README's default one may be a user's live cluster, "
        "and `up` refuses a live one",
    ),
    (
        "mcp-devcluster down",
        "mcp-devcluster down --state-dir {state}",
        "the same state directory as `up`",
    ),
)
# Steps whose non-zero exit is judged by the test rather than ending the run: the board exits 3
# on an Inconclusive drill (docs/mcp-check.md#exit-codes), and the user goes on to the last line.
JUDGED_LATER = ("kubectl mcp board",)


def _user_env() -> dict[str, str]:
    """A user's login shell: no KUBECONFIG, no operator ports, no virtual environment or harness
    directory on PATH; what ``up`` and the README's ``export`` give is all the block gets."""
    keep = (
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LC_ALL",
        "TERM",
        "TMPDIR",
        "MCP_OPERATOR_CACHE",
    )
    env = {name: os.environ[name] for name in keep if name in os.environ}
    hidden = (REPO / ".venv", build.cache_root())
    path = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if p]
    env["PATH"] = ":".join(p for p in path if not any(Path(p).is_relative_to(h) for h in hidden))
    return env


def _script(commands: list[str], state: Path, observed: Path) -> str:
    """The block as one bash script: each command as the README has it (after SUBSTITUTIONS),
    between markers that name the step and its exit status. Before the last line it copies what
    it must check afterwards: the state directory's record and the shell's background job."""
    quoted = {"state": shlex.quote(str(state))}
    steps = list(commands)
    for old, new, _why in SUBSTITUTIONS:
        hits = [i for i, c in enumerate(steps) if old in c]
        assert len(hits) == 1, f"substitution {old!r} matches {len(hits)} quick-start commands: {steps}"
        steps[hits[0]] = steps[hits[0]].replace(old, new.format(**quoted))
    lines = ["set -uo pipefail"]
    for i, command in enumerate(steps):
        if i == len(steps) - 1:
            lines.append(f"cp {quoted['state']}/state.json {shlex.quote(str(observed / 'state.json'))}")
            lines.append(f"jobs -p > {shlex.quote(str(observed / 'jobs'))}")
            lines.append(f"date +%s.%N > {shlex.quote(str(observed / 'at'))}")
        lines += [f"printf '\\n{MARK} step {i}\\n'", command, "rc=$?", f"printf '\\n{MARK} rc {i} %d\\n' $rc"]
        if not command.startswith(JUDGED_LATER):
            lines.append('[ "$rc" -eq 0 ] || exit "$rc"  # a user stops at the first failure')
    lines.append(f"printf '\\n{MARK} done\\n'")
    return "\n".join(lines) + "\n"


@dataclass
class Step:
    """One README command as the run saw it: its exit status (None: never reached) and output."""

    command: str
    rc: int | None
    output: str


def _steps(commands: list[str], output: str) -> list[Step]:
    """The run's output cut at its markers: what each command printed and its exit status."""
    steps = [Step(c, None, "") for c in commands]
    current: Step | None = None
    for line in output.splitlines():
        if line.startswith(f"{MARK} step "):
            current = steps[int(line.split()[2])]
        elif line.startswith(f"{MARK} rc "):
            _, _, index, rc = line.split()
            steps[int(index)].rc = int(rc)
            current = None
        elif current is not None:
            current.output += line + "\n"
    return steps


def _columns(table: str) -> dict[str, str]:
    """The first row of a kubectl table by its header's column names (``Score %`` included)."""
    lines = [line for line in table.splitlines() if line.strip()]
    header, row = lines[0], lines[1]
    spans = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    ends = [start for _, start in spans[1:]] + [len(row)]
    return {name: row[start:end].strip() for (name, start), end in zip(spans, ends, strict=True)}


def _running_since_before(pid: int, at: float) -> bool:
    """``pid`` runs (not a zombie) and started before ``at`` (epoch s): the same process, not a
    later one given its reused number."""
    if not running(pid):
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime")
    )
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK") <= at + 1


def _working_in(directory: Path) -> list[str]:
    """Processes whose working directory is ``directory``: what the block started from there."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(proc / "cwd")) == directory.resolve():
                    argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                    found.append(f"{proc.name}: {argv}")
    return found


def _run_bounded(proc: subprocess.Popen[str]) -> tuple[int | None, str]:
    """The shell's exit status and output within RUN_LIMIT_S; on time out its process group (the
    shell and the operator it put in the background) is killed and the status is None."""
    try:
        out, _ = proc.communicate(timeout=RUN_LIMIT_S)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def _checkout_view(tmp: Path) -> Path:
    """A working directory that is the repository to every command (each top-level entry linked),
    so ``operator.log`` lands here and not in the checkout."""
    tmp.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in (".git", "operator.log"):
            (tmp / entry.name).symlink_to(entry)
    return tmp


def test_the_readmes_quick_start_runs_as_written(tmp_path_factory: pytest.TempPathFactory) -> None:
    commands = readme.commands(readme.shell_block("Quick start"))
    base = tmp_path_factory.mktemp("qs")
    state, observed = base / "state", base / "observed"
    observed.mkdir()
    cwd = _checkout_view(base / "repo")
    script = base / "quickstart.sh"
    script.write_text(_script(commands, state, observed))
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", str(script)],
        cwd=cwd,
        env=_user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    try:
        rc, output = _run_bounded(proc)
        elapsed = time.monotonic() - started
        log = cwd / "operator.log"
        context = (
            f"{output}\n--- operator.log (tail) ---\n{log.read_text()[-3000:] if log.exists() else '(none)'}"
        )
        assert rc is not None, f"the quick start did not finish within {RUN_LIMIT_S}s\n{context}"
        steps = _steps(commands, output)
        for step in steps:
            if not step.command.startswith(JUDGED_LATER):
                assert step.rc == 0, f"{step.command!r} exited {step.rc}\n{context}"
        assert rc == 0 and f"{MARK} done" in output, context
        waited = next(s for s in steps if s.command.startswith("kubectl wait --for=condition=Complete"))
        assert waited.rc == 0, context

        # what `kubectl get mcpr` shows: Ready and a verdict, Pass; on a busy machine Warn (the
        # server, sharing the cores, really slowed: a P99 jump) or Inconclusive because the load
        # generator could not deliver or may have made a finding
        row = _columns(next(s for s in steps if s.command.startswith("kubectl get mcpr")).output)
        assert {"READY", "REASON", "VERDICT", "SCORE %", "STAGE"} <= set(row), context
        verdict = row["VERDICT"]
        ready = verdict in ("Pass", "Warn") and row["READY"] == "True"
        assert ready or (verdict, row["REASON"]) in demo.BUSY_MACHINE, context
        assert row["STAGE"] == "3/3", context

        # the board: its verdict line, the three KPIs (health passes either way), the three stages done
        board = next(s for s in steps if s.command.startswith("kubectl mcp board"))
        assert board.rc == (0 if ready else 3), context
        assert f"Verdict {verdict}" in board.output, context
        lines = board.output.splitlines()
        for kpi in KPIS:
            assert any(kpi in line.split() for line in lines), context
        health = next(line.split() for line in lines if "healthSuccessRatio" in line.split())
        assert "Pass" in health, context
        for stage in STAGES:
            assert any({stage, "Done"} <= set(line.split()) for line in lines), context

        # after `kill %1; mcp-devcluster down`: the recorded processes and the operator are gone
        at = float((observed / "at").read_text())
        recorded = json.loads((observed / "state.json").read_text())["pids"]
        operator_pids = [int(p) for p in (observed / "jobs").read_text().split()]
        assert len(operator_pids) == 1, operator_pids
        assert recorded, "the state directory recorded no processes"
        deadline = time.monotonic() + 15
        while True:
            left = {name: pid for name, pid in recorded.items() if _running_since_before(pid, at)}
            left.update(("operator", pid) for pid in operator_pids if _running_since_before(pid, at))
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert not left, f"still running after the last line: {left}"
        # stopped by `kill %1`, not by losing its lease once `down` stopped the API server
        stopped = log.read_text()
        assert "Signal SIGTERM is received" in stopped and "leadership lost" not in stopped, stopped[-3000:]
        assert not (state / "state.json").exists()
        assert not _working_in(cwd), _working_in(cwd)
        print(f"quick start as written: {elapsed:.1f}s, verdict {verdict}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the operator, when the block ended before `kill %1`
        subprocess.run(
            [str(REPO / ".venv" / "bin" / "mcp-devcluster"), "down", "--state-dir", str(state)],
            timeout=DOWN_LIMIT_S,
            check=False,
            capture_output=True,
        )


def _served(url: str) -> float:
    """Requests the reference server at ``url`` counted, read from its own /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(COUNTER + "{"))


def test_the_quick_start_drill_reaches_a_verdict_against_the_deployed_reference_server(
    kube: Any, sample: Any, cluster: ClusterState
) -> None:
    kube.run("apply", "-k", str(MANIFESTS))
    rolled = kube.run("rollout", "status", "deploy/refserver", "--timeout=120s", check=False)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    ip = kube.get("service", "refserver")["spec"]["clusterIP"]
    kube.apply(sample("mcpreadiness-drill.yaml", f"http://{ip}:8080"))

    waited = kube.wait("mcpreadiness/refserver-drill", "condition=Complete", timeout_s=180)
    obj = kube.get("mcpreadiness", "refserver-drill")
    status = obj["status"]
    assert waited.returncode == 0, json.dumps(status, indent=1)
    assert [s["phase"] for s in status["stages"]] == ["Done", "Done", "Done"]
    kpis = {k["name"]: k for k in status["kpis"]}
    assert kpis["healthSuccessRatio"]["verdict"] == "Pass", kpis
    ready = stack.condition_of(obj)
    busy = (kpis["loadGenerator"]["verdict"], ready["reason"]) in demo.BUSY_MACHINE
    assert ready["status"] == "True" or busy, status["checks"]
    # the drill's load went through the Service to both deployed pods (each counts its own)
    pods = json.loads(kube.run("get", "pods", "-l", "app.kubernetes.io/name=refserver", "-o", "json").stdout)
    assert len(pods["items"]) == 2
    loopback = ipaddress.IPv4Network(cluster.pod_loopback)
    counts = [_served(f"http://{loopback_twin(p['status']['podIP'], loopback)}:8000") for p in pods["items"]]
    assert all(count > 50 for count in counts), counts
