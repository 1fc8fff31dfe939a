"""One exit-code table for every command under ``mcp-check`` and ``kubectl mcp``: the table in
docs/mcp-check.md is ``mcp_checks.exitcodes`` (row for row), every subcommand the plugin
dispatches is in it, and each command's error paths end with the code the page gives: a usage
error, an API server nobody listens on, an API server that refuses (403) or has no such object
(404). The commands run as the plugin's process does (``python -m mcp_operator.board.command``),
against a kubeconfig whose server is a free local port; nothing outside this machine is dialled.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_bench.cli import common as bench_cli
from mcp_checks import cli
from mcp_checks.exitcodes import TITLE, ExitCode, markdown_rows
from mcp_checks.gate.judge import Wanted
from mcp_checks.gate.source import Transient
from mcp_checks.gate.wait import wait_for_verdict
from mcp_operator.benchmark import shard
from mcp_operator.board import command

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "mcp-check.md").read_text(encoding="utf-8")
PLUGIN = [sys.executable, "-m", "mcp_operator.board.command"]


def _section(heading: str) -> str:
    """The page's text under ``heading`` up to the next heading of any level."""
    start = PAGE.index(f"\n{heading}\n") + len(heading) + 2
    following = re.search(r"^#{1,6} ", PAGE[start:], flags=re.MULTILINE)
    return PAGE[start : start + following.start()] if following else PAGE[start:]


def _tables(text: str) -> list[list[list[str]]]:
    """The Markdown tables in ``text``: each a list of rows of cells, header and rule left out."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if current is None:
            current = []
            tables.append(current)  # this line is the header
        elif not set("".join(cells)) <= set("-: "):
            current.append(cells)
    return tables


def _codes(table: list[list[str]]) -> list[int]:
    return [int(row[0]) for row in table]


def _subcommands() -> set[str]:
    """What ``kubectl mcp`` dispatches: board, and every subcommand of ``mcp-check``."""
    parser = cli.build_parser()
    choices = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert isinstance(choices, dict)
    return {"board", *choices}


# --- the page, the code and the commands agree ---


def test_the_pages_table_is_the_enum_row_for_row() -> None:
    main = _tables(_section("## Exit codes"))[0]
    assert _codes(main) == [int(code) for code in ExitCode] == [0, 1, 2, 3, 4]
    assert [row[1] for row in main] == [f"`{code.name}`" for code in ExitCode]
    rows = [line for line in _section("## Exit codes").splitlines() if re.match(r"\| \d \|", line)]
    assert rows[: len(ExitCode)] == markdown_rows()


def test_the_api_server_table_names_every_command_the_plugin_dispatches() -> None:
    commands = {row[0].strip("`").split()[-1] for row in API_TABLE}
    assert commands == _subcommands() == {"board", "gate", "health", "xds", "config", "drift", "all"}


def test_every_help_prints_the_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    for sub in sorted(_subcommands()):
        with pytest.raises(SystemExit) as exited:
            command.kubectl_main([sub, "--help"])
        out = capsys.readouterr().out
        assert exited.value.code == 0 and TITLE in out, sub
        for code in ExitCode:
            assert f"\n  {int(code)}  " in out.split(TITLE, 1)[1], (sub, code)


def test_mcp_bench_and_the_shard_pod_document_the_codes_they_give() -> None:
    bench = _tables(_section("### `mcp-bench`"))[0]
    exits = (bench_cli.EXIT_OK, bench_cli.EXIT_SLO, bench_cli.EXIT_USAGE, bench_cli.EXIT_NOTHING)
    assert _codes(bench) == sorted(exits) == [0, 1, 2, 3]
    assert "nothing measured" in bench[3][1] and "usage error" in bench[2][1]  # the table's meanings
    pod = _tables(_section("### The benchmark shard pod"))[0]
    assert _codes(pod) == [0, shard.EXIT_PLAN, shard.EXIT_PUBLISH]


# --- usage errors: 2 for every subcommand, before anything is dialled ---

MISSING = {  # each subcommand without what it cannot run without
    "board": [],
    "gate": [],
    "health": [],
    "xds": [],
    "config": ["--configmap", "c"],
    "drift": ["--rule", "r"],
    "all": [],
}


@pytest.mark.parametrize("sub", sorted(MISSING))
@pytest.mark.parametrize("kind", ["missing", "unknown flag", "bad kubeconfig"])
def test_a_usage_error_is_2_for_every_subcommand(
    sub: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "missing": [sub, *MISSING[sub]],
        "unknown flag": [sub, "x", "--no-such-flag"] if sub in ("board", "gate") else [sub, "--no-such-flag"],
        "bad kubeconfig": [sub, "x", "--kubeconfig", "/nonexistent/kubeconfig"],
    }[kind]
    with pytest.raises(SystemExit) as exited:
        command.kubectl_main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == ExitCode.USAGE, err
    if kind == "unknown flag":  # argparse says it with the top parser's usage line
        assert "usage: kubectl mcp" in err and "unrecognized arguments: --no-such-flag" in err
    else:
        assert f"usage: kubectl mcp {sub}" in err and "error: " in err


@pytest.mark.parametrize("argv", [[], ["no-such-command"]])
def test_no_subcommand_or_an_unknown_one_is_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        command.kubectl_main(argv)
    assert exited.value.code == ExitCode.USAGE and "usage: kubectl mcp" in capsys.readouterr().err


def test_an_unreadable_kubeconfig_is_2(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\ncurrent-context: none\n")
    for argv in (["board", "x"], ["gate", "mcpr/x", "--timeout", "5s"]):
        done = subprocess.run(
            [*PLUGIN, *argv, "--kubeconfig", str(broken)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == ExitCode.USAGE, (argv, done.stdout, done.stderr)
        assert "--kubeconfig" in done.stderr


# --- the API server: unreachable, refusing, without the object ---

API_TABLE = _tables(_section("## Exit codes"))[1]


def _free_port() -> int:
    """A local port nobody listens on (bound, read, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kubeconfig(path: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "demo"}}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _argv(sub: str, kubeconfig: Path, tmp_path: Path, dead: str) -> list[str]:
    """``sub`` asked something only the API server can answer (targets on a port nobody hears)."""
    given = ["--kubeconfig", str(kubeconfig)]
    if sub == "all":
        manifest = {
            "apiVersion": "mcp2026.io/v1alpha1",
            "kind": "MCPReadiness",
            "metadata": {"name": "g", "namespace": "demo"},
            "spec": {
                "target": {"url": dead},
                "checks": {
                    "healthProbe": {"enabled": False},
                    "configConsistency": {
                        "workload": {"kind": "Deployment", "name": "web"},
                        "configMaps": ["c"],
                    },
                },
            },
        }
        (tmp_path / "gate.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
        return ["all", "-f", str(tmp_path / "gate.yaml"), *given]
    return {
        "board": ["board", "x", *given],
        "gate": ["gate", "mcpreadiness/x", "--timeout", "2s", *given],
        "config": ["config", "--url", dead, "--deployment", "web", "--configmap", "c", *given],
        "xds": ["xds", "--url", dead, "--envoy-admin", dead, "--selector", "app=web", *given],
        "drift": [
            "drift",
            "--url",
            dead,
            "--prometheus",
            dead,
            "--rule",
            "r",
            "--reference-configmap",
            "demo/r/k",
            *given,
        ],
        "health": ["health", "--url", dead, "--requests", "2", *given],
    }[sub]


def _documented(row: list[str]) -> int | None:
    """The code a row of the API server table gives (None: the command never reads it)."""
    found = re.match(r"\d", row[2])
    return None if found is None else int(found.group())


@pytest.mark.parametrize("row", API_TABLE, ids=[row[0].strip("`") for row in API_TABLE])
def test_an_api_server_nobody_listens_on_gives_the_documented_code(row: list[str], tmp_path: Path) -> None:
    sub = row[0].strip("`").split()[-1]
    expected = _documented(row)
    dead = f"http://127.0.0.1:{_free_port()}"
    if expected is None:  # it never reads the API server: its target's code is the table's 3
        assert sub == "health" and "never" in row[1]
        expected = ExitCode.NOT_VERIFIED
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{_free_port()}")
    done = subprocess.run(
        [*PLUGIN, *_argv(sub, kubeconfig, tmp_path, dead)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == expected, (done.stdout, done.stderr)
    said = done.stdout + done.stderr
    why = {
        "board": "cannot reach the API server",
        "gate": "the API server did not answer",
        "config": "KubernetesApiUnreachable",
        "health": "TargetUnreachable",
    }
    assert why.get(sub, "verdict: ") in said


class _Answer(BaseHTTPRequestHandler):
    status = 403

    def do_GET(self) -> None:
        body = json.dumps(
            {"kind": "Status", "status": "Failure", "code": self.status, "message": "no"}
        ).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def answering(tmp_path: Path) -> Iterator[tuple[Path, type[_Answer]]]:
    """A kubeconfig whose API server answers every request with ``_Answer.status``."""
    handler = type("Answer", (_Answer,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{server.server_port}"), handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("status", "code"),
    [(403, ExitCode.NOT_VERIFIED), (404, ExitCode.USAGE)],
)
@pytest.mark.parametrize("sub", ["board", "gate"])
def test_a_refusal_is_3_and_what_is_not_there_is_2_at_once(
    sub: str, status: int, code: ExitCode, answering: tuple[Path, type[_Answer]], tmp_path: Path
) -> None:
    kubeconfig, handler = answering
    handler.status = status
    argv = _argv(sub, kubeconfig, tmp_path, "http://127.0.0.1:1")
    if sub == "gate":
        argv[argv.index("2s")] = "60s"  # answered at once all the same: nothing to wait for
    done = subprocess.run([*PLUGIN, *argv], capture_output=True, text=True, timeout=50)
    assert done.returncode == code, (done.stdout, done.stderr)


class _Outage:
    """An API server that answers ``answers`` reads (a gate whose spec is not taken up yet),
    then only fails to connect."""

    def __init__(self, answers: int) -> None:
        self.answers = answers

    def get(self) -> dict[str, Any]:
        if self.answers <= 0:
            raise Transient("ConnectionRefusedError: connection refused")
        self.answers -= 1
        return {"metadata": {"generation": 2, "resourceVersion": "7"}, "status": {"observedGeneration": 1}}

    def missing(self) -> str | None:
        return None

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Any]]:
        raise Transient("ConnectionRefusedError: connection refused")
        yield  # a generator, as the watch is


@pytest.mark.parametrize("answers", [0, 1])
def test_the_gate_waits_through_an_outage_and_its_timeout_says_the_server_did_not_answer(
    answers: int,
) -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += max(seconds, 0.5)

    decision = wait_for_verdict(
        _Outage(answers), Wanted(release="r2"), 5.0, clock=lambda: now[0], sleep=sleep
    )
    assert decision.code == ExitCode.TIMEOUT and now[0] >= 5.0
    if answers == 0:
        assert "last seen: the API server did not answer (ConnectionRefusedError" in decision.message
        assert "does not exist" not in decision.message  # it was never asked
    else:
        assert "generation 2, observed 1" in decision.message
        assert "then the API server stopped answering (ConnectionRefusedError" in decision.message
