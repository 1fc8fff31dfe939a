"""``mcp-check gate``: which evaluation counts, the exit codes (``mcp-check``'s: 0 Pass/Warn,
1 Fail at once, 2 usage, 3 Inconclusive/Error, 4 timeout), the verdict table and JUnit XML.

The decision logic runs against a scripted source (the object now, then watch events); the
command as a process runs against a small HTTP server that answers the two requests the
``kubernetes`` client makes (GET of the object, and a watch of it from a resourceVersion) the way
the API server does, so the client's own watch is exercised. The e2e test
(e2e/test_release_gate.py) runs it against the real API server and operator.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from mcp_checks import argtypes, cli
from mcp_checks.gate import command
from mcp_checks.gate.judge import Decision, Wanted
from mcp_checks.gate.judge import judge as judge_object
from mcp_checks.gate.source import GateApiError, Transient
from mcp_checks.status import ReadinessObject

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

NS = "shop"
NAME = "release-gate"


def stamp(offset_s: float = 0.0) -> str:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset_s)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def obj(
    verdict: str = "Pass",
    *,
    revision: str | None = "r1",
    started: str | None = None,
    completed: bool = True,
    phase: str | None = None,
    generation: int = 1,
    observed: int | None = None,
    suspend: bool = False,
    rv: str = "10",
    checks: list[dict[str, Any]] | None = None,
    watch: bool = False,
) -> dict[str, Any]:
    """An MCPReadiness as the operator leaves it; ``watch``: one that evaluates again when its
    Deployment changes (so a later evaluation may come without a spec change)."""
    ready = {"Pass": "True", "Warn": "True"}.get(verdict, "False")
    reason = {"Pass": "ChecksPassed", "Warn": "ChecksPassedWithWarnings"}.get(verdict, "HealthBelowThreshold")
    if phase is None:
        phase = "Succeeded" if ready == "True" else "Failed"
    if checks is None:
        checks = [
            {
                "name": "health-probe",
                "verdict": verdict,
                "reason": reason,
                "message": f"{verdict.lower()} as measured",
                "observed": {"requests": "200", "succeeded": "200" if ready == "True" else "0"},
                "thresholds": {"minSuccessRatio": "0.99"},
                "measuredAt": "2026-05-01T12:00:01Z",
                "durationMs": 120,
            }
        ]
    release = {
        "revision": revision,
        "trigger": "Spec",
        "generation": generation,
        "startedAt": started or stamp(-3600),
        "completedAt": "2026-05-01T12:00:01Z" if completed else None,
    }
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": NAME, "namespace": NS, "generation": generation, "resourceVersion": rv},
        "spec": {
            "target": {"url": "http://t"},
            "suspend": suspend,
            **({"watch": {"workload": {"name": "web"}}} if watch else {}),
        },
        "status": {
            "observedGeneration": generation if observed is None else observed,
            "phase": phase if completed else "Running",
            "verdict": verdict,
            "checks": checks,
            "release": release,
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready if completed else "Unknown",
                    "reason": reason if completed else "Evaluating",
                    "message": f"verdict {verdict}",
                    "lastTransitionTime": "2026-05-01T12:00:01Z",
                }
            ],
        },
    }


def judge(raw: dict[str, Any], wanted: Wanted) -> Decision | None:
    """``judge`` of the object as the API server returns it."""
    return judge_object(ReadinessObject.read(raw), wanted)


class Script:
    """The object now, then watch events each after a delay; a watch with nothing left to say
    blocks until its timeout, as the API server's does."""

    def __init__(self, initial: dict[str, Any] | None, *events: tuple[float, str, dict[str, Any]]) -> None:
        self.current = initial
        self.events = list(events)
        self.watches: list[str | None] = []
        self.errors: list[Exception] = []
        self.absent: str | None = None  # what missing() answers

    def missing(self) -> str | None:
        return self.absent

    def get(self) -> dict[str, Any] | None:
        if self.errors:
            raise self.errors.pop(0)
        return self.current

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Any]]:
        self.watches.append(resource_version)
        while self.events:
            delay, kind, changed = self.events.pop(0)
            time.sleep(delay)
            self.current = None if kind == "DELETED" else changed
            yield kind, changed
        time.sleep(min(timeout_s, 0.2))


def run(*argv: str, source: Script) -> tuple[int, str, float]:
    out = io.StringIO()
    args = cli.build_parser().parse_args(["gate", f"mcpreadiness/{NAME}", "-n", NS, *argv])
    began = time.monotonic()
    code = command.run(args, source=source, out=out)
    return code, out.getvalue(), time.monotonic() - began


@pytest.mark.parametrize(
    ("verdict", "code"), [("Pass", 0), ("Warn", 0), ("Fail", 1), ("Inconclusive", 3), ("Error", 3)]
)
def test_exit_code_of_each_verdict(verdict: str, code: int, tmp_path: Path) -> None:
    report = tmp_path / "gate.xml"
    got, out, _ = run("--release", "r1", "--junit", str(report), source=Script(obj(verdict)))
    assert got == code, out
    assert f"mcpreadiness/{NAME} ({NS}): {verdict}" in out
    assert "health-probe" in out and "release: revision r1" in out
    suite = ET.parse(report).getroot()
    assert suite.get("name") == f"mcpreadiness/{NAME}" and suite.get("tests") == "1"
    case = suite.find("testcase")
    assert case is not None
    tag = {"Fail": "failure", "Inconclusive": "error", "Error": "error"}.get(verdict, "system-out")
    assert case.find(tag) is not None


def test_the_previous_release_verdict_is_never_taken_and_a_fail_returns_at_once() -> None:
    """Release r1 passed; the sync of r2 has applied the gate's new spec (generation 2, not yet
    taken up): the gate waits through r2's evaluation and exits 1 as soon as its Fail is
    written, far inside its timeout."""
    source = Script(
        obj("Pass", revision="r1", generation=2, observed=1, rv="10"),
        (0.1, "MODIFIED", obj("Pass", revision="r2", completed=False, generation=2, observed=1, rv="11")),
        (0.1, "MODIFIED", obj("Pass", revision="r2", completed=False, generation=2, rv="12")),
        (0.2, "MODIFIED", obj("Fail", revision="r2", generation=2, rv="13")),
    )
    code, out, took = run("--release", "r2", "--timeout", "10m", source=source)
    assert code == 1, out
    assert took < 2, took  # the Fail, not the 10-minute timeout
    assert source.watches == ["10"]  # one watch, from the version read


def test_by_default_only_an_evaluation_started_after_the_command_counts() -> None:
    """A watching gate: its Deployment's new release starts an evaluation after the command."""
    source = Script(
        obj("Pass", started=stamp(-5), watch=True),  # a verdict from before the command: not this release's
        (0.2, "MODIFIED", obj("Pass", started=stamp(0.1), completed=False, rv="11", watch=True)),
        (0.1, "MODIFIED", obj("Fail", started=stamp(0.1), rv="12", watch=True)),
    )
    code, out, took = run("--timeout", "600", source=source)
    assert code == 1 and took < 2, out


def test_since_takes_an_evaluation_started_at_or_after_it() -> None:
    started = "2026-05-01T12:00:00.500Z"
    assert run("--since", "2026-05-01T12:00:00.500Z", source=Script(obj(started=started)))[0] == 0
    assert run("--since", "2026-05-01T14:00:00.400+02:00", source=Script(obj(started=started)))[0] == 0
    code, out, _ = run(
        "--since",
        "2026-05-01T12:00:00.501Z",
        "--timeout",
        "1s",
        source=Script(obj(started=started, watch=True)),
    )
    assert code == 4, out


def test_timeout_exits_4_with_what_was_seen_last(tmp_path: Path) -> None:
    report = tmp_path / "gate.xml"
    running = obj("Pass", revision="r2", completed=False)
    code, out, took = run(
        "--release", "r2", "--timeout", "1s", "--junit", str(report), source=Script(running)
    )
    assert code == 4 and 0.9 < took < 5, (out, took)
    assert "Timeout (TimedOut)" in out and "phase Running" in out
    error = ET.parse(report).getroot().find("testcase/error")
    assert error is not None and "no verdict for release r2 after 1s" in (error.get("message") or "")


def test_a_spec_change_not_yet_taken_up_is_waited_for() -> None:
    stale = obj("Pass", revision="r2", generation=2, observed=1)  # r2 recorded, but generation 2 pending
    assert judge(stale, Wanted(release="r2")) is None
    other = obj("Pass", revision="r2", generation=2)
    other["status"]["release"]["generation"] = 1
    assert judge(other, Wanted(release="r2")) is None
    assert judge(obj("Pass", revision="r2", generation=2), Wanted(release="r2")) is not None


def test_a_rejected_spec_and_a_suspended_gate_are_not_verified() -> None:
    invalid = obj("Error", phase="Invalid", checks=[])
    invalid["status"]["conditions"][0].update(
        reason="TargetNotFound", message="Service shop/triton not found"
    )
    code, out, _ = run("--release", "r1", source=Script(invalid))
    assert code == 3 and "gate" in out and "TargetNotFound" in out
    code, out, _ = run("--release", "r1", source=Script(obj("Pass", suspend=True)))
    assert code == 3 and "Suspended" in out


def test_api_errors_forbidden_at_once_transient_retried() -> None:
    source = Script(obj("Pass"))
    source.errors = [GateApiError("403 Forbidden: cannot get mcpreadinesses")]
    code, out, took = run("--release", "r1", source=source)
    assert code == 3 and "ApiError" in out and took < 1
    source = Script(obj("Pass"))
    source.errors = [Transient("503 Service Unavailable"), Transient("ConnectionRefusedError")]
    assert run("--release", "r1", source=source)[0] == 0


def test_a_gate_that_does_not_exist_yet_is_waited_for() -> None:
    source = Script(None, (0.1, "ADDED", obj("Pass", completed=False)), (0.1, "MODIFIED", obj("Warn")))
    assert run("--release", "r1", source=source)[0] == 0


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["gate", "deployment/web"], "mcpreadiness/NAME"),
        (["gate", "mcpreadiness/"], "mcpreadiness/NAME"),
        (["gate", "mcpreadiness/x", "--timeout", "soon"], "--timeout"),
        (["gate", "mcpreadiness/x", "--timeout", "0s"], "--timeout"),
        (["gate", "mcpreadiness/x", "--timeout", "-5"], "--timeout"),
        (["gate", "mcpreadiness/x", "--since", "2026-05-01T12:00:00"], "--since"),
        (["gate", "mcpreadiness/x", "--since", "yesterday"], "--since"),
        (["gate", "mcpreadiness/x", "--kubeconfig", "/no/such/kubeconfig"], "--kubeconfig"),
        (["gate", "mcpreadiness/x", "--junit", "/no/such/dir/gate.xml"], "--junit"),
    ],
)
def test_usage_errors_exit_2_and_name_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "usage: mcp-check gate" in err and f"mcp-check gate: error: argument {flag}:" in err, err


def test_release_and_since_exclude_each_other_and_kubectl_names_the_plugin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["gate", "mcpreadiness/x", "--release", "a", "--since", "2026-05-01T12:00:00Z"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        cli.kubectl_main(["gate", "--help"])
    assert exited.value.code == 0 and "usage: kubectl mcp gate" in capsys.readouterr().out


def test_durations() -> None:
    parse_duration = argtypes.duration(above=0)  # the gate's --timeout
    assert parse_duration("90") == 90 and parse_duration("90s") == 90 and parse_duration("10m") == 600
    assert parse_duration("1h30m") == 5400 and parse_duration("500ms") == 0.5


# --- the command as a process, through the kubernetes client, against a small HTTP API ---


class FakeApiServer:
    """GET /apis/mcp2026.io/v1alpha1/namespaces/NS/mcpreadinesses/NAME answers the object;
    GET .../mcpreadinesses?watch=true&fieldSelector=metadata.name=NAME&resourceVersion=V streams
    the scripted events (JSON lines) and then holds the connection until timeoutSeconds. As the
    API server: no object is a 404 Status; a kind not served 404s its list too; a list without
    watch answers the items; GET /api/v1/namespaces/NS answers ``namespace`` (a status code)."""

    def __init__(
        self,
        initial: dict[str, Any] | None,
        events: list[tuple[float, dict[str, Any]]],
        *,
        served: bool = True,
        namespace: int = 200,
    ) -> None:
        self.initial, self.events = initial, events
        self.served, self.namespace = served, namespace
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def answer(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def status(self, code: int, reason: str) -> None:
                self.answer(code, {"kind": "Status", "status": "Failure", "reason": reason, "code": code})

            def do_GET(self) -> None:
                server.requests.append(self.path)
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                base = f"/apis/mcp2026.io/v1alpha1/namespaces/{NS}/mcpreadinesses"
                if url.path == f"/api/v1/namespaces/{NS}":
                    if server.namespace != 200:
                        self.status(server.namespace, "NotFound" if server.namespace == 404 else "Forbidden")
                        return
                    self.answer(
                        200, {"kind": "Namespace", "metadata": {"name": NS}, "status": {"phase": "Active"}}
                    )
                    return
                if not server.served and url.path.startswith(base):
                    self.status(404, "NotFound")  # the API server serves no such resource
                    return
                if url.path == f"{base}/{NAME}":
                    if server.initial is None:
                        self.status(404, "NotFound")
                    else:
                        self.answer(200, server.initial)
                    return
                if url.path == base and "watch" not in query:
                    items = [] if server.initial is None else [server.initial]
                    self.answer(
                        200,
                        {"kind": "MCPReadinessList", "metadata": {"resourceVersion": "9"}, "items": items},
                    )
                    return
                assert url.path == base and query["watch"] == ["true"], self.path
                assert query["fieldSelector"] == [f"metadata.name={NAME}"]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for delay, event in server.events:
                    time.sleep(delay)
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                server.events = []
                time.sleep(min(float(query.get("timeoutSeconds", ["1"])[0]), 2))
                self.wfile.write(b"0\r\n\r\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path: Path) -> Path:
        host, port = self.httpd.server_address[:2]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://{host!s}:{port}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u", "namespace": NS}}],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config))
        return path


def _process(kubeconfig: Path, *argv: str) -> tuple[int, str, float]:
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_checks.cli",
            "gate",
            f"mcpreadiness/{NAME}",
            "--kubeconfig",
            str(kubeconfig),
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def test_the_process_fails_fast_on_a_watched_fail(tmp_path: Path) -> None:
    running = obj("Pass", revision="r2", completed=False, rv="20")
    events = [
        (0.2, {"type": "MODIFIED", "object": obj("Pass", revision="r2", completed=False, rv="21")}),
        (0.3, {"type": "MODIFIED", "object": obj("Fail", revision="r2", rv="22")}),
    ]
    with FakeApiServer(running, events) as api:
        code, out, took = _process(api.kubeconfig(tmp_path / "kc"), "--release", "r2", "--timeout", "10m")
    assert code == 1, out
    assert took < 10, took
    watch = next(r for r in api.requests if "watch=true" in r)
    assert "resourceVersion=20" in watch  # the namespace came from the kubeconfig's context


def test_the_process_times_out_with_exit_4(tmp_path: Path) -> None:
    with FakeApiServer(obj("Pass", revision="r1", watch=True), []) as api:
        code, out, took = _process(api.kubeconfig(tmp_path / "kc"), "--release", "r2", "--timeout", "2s")
    assert took < 30
    assert code == 4 and "TimedOut" in out, out


# --- what cannot come is not waited for ---------------------------------------------------


@pytest.mark.parametrize(
    ("served", "namespace", "said"),
    [
        (False, 200, "the MCPReadiness CRD is not installed"),
        (True, 404, f"namespace '{NS}' does not exist"),
    ],
)
def test_a_kind_or_namespace_that_does_not_exist_is_exit_2_at_once(
    served: bool, namespace: int, said: str, tmp_path: Path
) -> None:
    with FakeApiServer(None, [], served=served, namespace=namespace) as api:
        code, out, took = _process(api.kubeconfig(tmp_path / "kc"), "--release", "r1", "--timeout", "10m")
    assert code == 2, out
    assert took < 30, took  # not the 10-minute timeout
    assert f"mcpreadiness/{NAME} cannot appear: " in out and said in out, out


def test_a_gate_not_there_yet_in_a_namespace_it_may_not_read_is_waited_for(tmp_path: Path) -> None:
    """A Role cannot grant reading the namespace: 403 says nothing about it, so the gate that is
    not there yet is waited for, as before."""
    with FakeApiServer(None, [], namespace=403) as api:
        code, out, _ = _process(api.kubeconfig(tmp_path / "kc"), "--release", "r1", "--timeout", "2s")
    assert code == 4 and "TimedOut" in out, out


def test_a_missing_gate_asks_why_only_when_it_is_missing() -> None:
    source = Script(None, (0.1, "ADDED", obj("Pass", completed=False)), (0.1, "MODIFIED", obj("Fail")))
    source.absent = None
    assert run("--release", "r1", source=source)[0] == 1
    source = Script(obj("Pass"))
    source.absent = "namespace 'shop' does not exist"  # never asked: the object is there
    assert run("--release", "r1", source=source)[0] == 0


@pytest.mark.parametrize(("verdict", "code"), [("Pass", 0), ("Warn", 0), ("Fail", 1), ("Inconclusive", 3)])
def test_a_finished_evaluation_nothing_will_repeat_answers_at_once_with_its_verdict(
    verdict: str, code: int
) -> None:
    """A drill or one-shot gate evaluated before the command started, with no watch and no
    recheck: no evaluation after --since (its default: now) will come, so the verdict that
    stands is printed with what --since waited for, and its code returned at once."""
    got, out, took = run("--timeout", "10m", source=Script(obj(verdict, started=stamp(-3600))))
    assert got == code, out
    assert took < 5, took
    assert f"mcpreadiness/{NAME} ({NS}): {verdict}" in out and "health-probe" in out
    assert "note: --since " in out and "none will come" in out and "only a change of its spec" in out


def test_another_release_finished_is_exit_3_naming_both_releases(tmp_path: Path) -> None:
    report = tmp_path / "gate.xml"
    code, out, took = run(
        "--release",
        "r2",
        "--timeout",
        "10m",
        "--junit",
        str(report),
        source=Script(obj("Pass", revision="r1")),
    )
    assert code == 3 and took < 5, out
    assert "Inconclusive (ReleaseNotEvaluated)" in out, out
    assert "judged r1 with Pass" in out and "spec.release: r2 would" in out, out
    error = ET.parse(report).getroot().find("testcase/error")
    assert error is not None and "ReleaseNotEvaluated" in (error.get("message") or "") + (error.text or "")


def _spec(o: dict[str, Any], **extra: Any) -> dict[str, Any]:
    o["spec"].update(extra)
    return o


@pytest.mark.parametrize(
    "gate",
    [
        obj("Pass", started=stamp(-3600), watch=True),  # the Deployment may change
        _spec(obj("Pass", started=stamp(-3600)), recheckIntervalSeconds=60),  # a standing gate's timer
        obj("Pass", started=stamp(-3600), completed=False),  # a round running
        obj("Pass", started=stamp(-3600), generation=2, observed=1),  # a spec not taken up yet
    ],
)
def test_a_gate_that_may_be_evaluated_again_is_waited_for(gate: dict[str, Any]) -> None:
    code, out, _ = run("--timeout", "1s", source=Script(gate))
    assert code == 4 and "TimedOut" in out, out


def test_a_verdict_the_operator_will_evaluate_again_is_waited_past() -> None:
    """A verdict of the operator's own capacity (ProberOverloaded, a probe round timed out) is
    evaluated again at status.retry.nextAt: a later evaluation will come, so it is waited for;
    once no retry is due (nextAt null), the verdict stands."""
    gate = obj("Inconclusive", started=stamp(-3600))
    gate["status"]["retry"] = {"attempts": 1, "nextAt": "2026-05-01T12:00:20Z", "reason": "ProberOverloaded"}
    code, out, _ = run("--timeout", "1s", source=Script(gate))
    assert code == 4, out
    gate["status"]["retry"]["nextAt"] = None
    code, out, took = run("--timeout", "10m", source=Script(gate))
    assert code == 3 and took < 5 and "note: --since" in out, out


def test_a_rejected_spec_without_a_release_record_stands() -> None:
    invalid = obj("Error", phase="Invalid", checks=[])
    del invalid["status"]["release"]
    invalid["status"]["conditions"][0].update(
        reason="InvalidCheck", message="checks.xdsSync.sources: required"
    )
    code, out, took = run("--timeout", "10m", source=Script(invalid))
    assert code == 3 and took < 5 and "InvalidCheck" in out, out
