"""The k6 engine: script generation and the JSON-output parser always; a real k6 run only where the
user has put a k6 on PATH (k6 is AGPL: this project never installs or downloads it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.engines.external import EngineUnavailableError
from mcp_bench.engines.k6 import (
    OPEN_LOOP_NOTE,
    K6Engine,
    K6Points,
    classify,
    parse_rfc3339_ns,
    server_from_console,
    summary_http_reqs,
)
from mcp_bench.engines.k6_script import MEASURE_SCENARIO, SENT_METRIC, WARMUP_SCENARIO, k6_script, scenarios
from mcp_bench.load.common import CUT_OFF
from mcp_bench.plan import PlanError, RunPlan, Slo
from mcp_bench.records import ErrorKind
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_refserver import start_refserver

NO_K6 = "k6 not found on PATH; mcp-operator does not ship k6 (AGPL); install it yourself"
CLOSED = LevelMeta(index=0, mode="closed", concurrency=4)


def _plan(levels: dict[str, Any], stage: dict[str, Any], url: str = "http://127.0.0.1:9/x") -> RunPlan:
    return RunPlan.from_dict(
        {
            "url": url,
            "engine": "k6",
            "levels": levels,
            "stage": stage,
            "payload": {"method": "POST", "body": '{"q": "it\'s"}', "headers": {"X-A": "b"}},
        }
    )


# -- k6 missing ---------------------------------------------------------------------------------
def test_missing_k6_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    plan = _plan({"concurrency": [1]}, {"requests": 1})
    with pytest.raises(EngineUnavailableError, match=re.escape(NO_K6)):
        K6Engine().check_plan(plan)
    with pytest.raises(EngineUnavailableError, match="is not an executable file"):
        K6Engine(binary=str(tmp_path / "k6")).check_plan(plan)


def test_cli_without_k6_exits_2_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    argv = ["run", "-q", "--engine", "k6", "--url", "http://127.0.0.1:9/", "--concurrency", "1"]
    assert main([*argv, "--requests", "1"]) == 2
    assert NO_K6 in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    ("levels", "field"),
    [
        ({"rate": [10]}, "levels.arrival"),  # default Poisson: k6 has no Poisson executor
        ({"rate": [10], "arrival": "constant"}, "levels.overload"),  # default 'late': k6 drops
    ],
)
def test_open_loop_plans_must_match_what_k6_does(levels: dict[str, Any], field: str) -> None:
    with pytest.raises(PlanError, match=f"^{field}:"):
        K6Engine().check_plan(_plan(levels, {"duration_s": 1}))


# -- script generation --------------------------------------------------------------------------
def _options(script: str) -> dict[str, Any]:
    m = re.search(r"^export const options = (\{.*?\n\});$", script, re.S | re.M)
    assert m, script
    parsed: dict[str, Any] = json.loads(m.group(1))
    return parsed


def test_closed_loop_script() -> None:
    plan = _plan({"concurrency": [4]}, {"warmup_s": 1.5, "duration_s": 10})
    script = k6_script(plan, CLOSED, drain_s=2.0)
    sc = _options(script)["scenarios"]
    assert sc[WARMUP_SCENARIO] == {
        "executor": "constant-vus",
        "vus": 4,
        "duration": "1500ms",
        "gracefulStop": "0s",
    }
    assert sc[MEASURE_SCENARIO] == {
        "executor": "constant-vus",
        "vus": 4,
        "duration": "10000ms",
        "startTime": "1500ms",
        "gracefulStop": "2000ms",
    }
    cfg = json.loads(re.search(r"^const CFG = (.*);$", script, re.M).group(1))  # type: ignore[union-attr]
    assert cfg == {
        "method": "POST",
        "url": "http://127.0.0.1:9/x",
        "body": '{"q": "it\'s"}',
        "headers": {"X-A": "b"},
        "timeout": "30000ms",
    }
    assert f"new Counter('{SENT_METRIC}')" in script and "sent.add(1)" in script


def test_request_counted_and_open_loop_scenarios() -> None:
    counted = scenarios(
        _plan({"concurrency": [8]}, {"requests": 5}), LevelMeta(0, "closed", concurrency=8), 1.0
    )
    assert counted == {
        MEASURE_SCENARIO: {
            "executor": "shared-iterations",
            "vus": 5,  # never more VUs than iterations (k6 refuses that)
            "iterations": 5,
            "maxDuration": "86400000ms",
            "startTime": "0ms",
            "gracefulStop": "1000ms",
        }
    }
    plan = _plan(
        {"rate": [12.5], "arrival": "constant", "overload": "drop", "max_concurrency": 32},
        {"warmup_s": 1, "duration_s": 4, "requests": 25},
    )
    sc = scenarios(plan, LevelMeta(0, "open", requested_rate=12.5), 0.5)
    rate = {
        "executor": "constant-arrival-rate",
        "rate": 12500,
        "timeUnit": "1000s",
        "preAllocatedVUs": 32,
        "maxVUs": 32,
    }
    assert sc[WARMUP_SCENARIO] == {**rate, "duration": "1000ms", "gracefulStop": "0s"}
    # 25 requests at 12.5/s take 2 s, shorter than the 4 s duration.
    assert sc[MEASURE_SCENARIO] == {
        **rate,
        "duration": "2000ms",
        "startTime": "1000ms",
        "gracefulStop": "500ms",
    }


@pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed (used only as a syntax check)"
)
def test_script_is_valid_javascript(tmp_path: Path) -> None:
    path = tmp_path / "level.mjs"
    path.write_text(k6_script(_plan({"concurrency": [2]}, {"duration_s": 1}), CLOSED, 1.0))
    out = subprocess.run(["node", "--check", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


# -- the JSON output parser, on lines in k6's documented format -----------------------------------
T0 = "2024-05-09T14:34:45.123456789+02:00"
T0_NS = 1715258085_123456789


def _tags(scenario: str, status: int, error_code: int | None = None) -> dict[str, str]:
    tags = {"group": "", "method": "GET", "name": "http://127.0.0.1:9/x", "proto": "HTTP/1.1",
            "scenario": scenario, "status": str(status), "url": "http://127.0.0.1:9/x",
            "expected_response": "true" if 200 <= status < 400 else "false"}  # fmt: skip
    if error_code is not None:
        tags["error_code"] = str(error_code)
    return tags


def _point(metric: str, time: str, value: float, tags: dict[str, str] | None) -> str:
    return json.dumps(
        {"metric": metric, "type": "Point", "data": {"time": time, "value": value, "tags": tags}}
    )


def _request_lines(
    time: str, ms: float, scenario: str, status: int, error_code: int | None = None
) -> list[str]:
    """What k6 writes for one request: a point per HTTP metric, all stamped at the request's end."""
    tags = _tags(scenario, status, error_code)
    lines = [_point("http_reqs", time, 1, tags), _point("http_req_duration", time, ms, tags)]
    for metric in ("http_req_blocked", "http_req_connecting", "http_req_sending", "http_req_waiting"):
        lines.append(_point(metric, time, 0.01, tags))
    lines.append(_point("http_req_failed", time, 0 if status and status < 400 else 1, tags))
    return lines


def _at(ms: int) -> str:
    return f"2024-05-09T12:34:45.{123 + ms:03d}456789Z"


def test_time_parsing_keeps_nanoseconds() -> None:
    assert parse_rfc3339_ns(T0) == T0_NS
    assert parse_rfc3339_ns("2024-05-09T12:34:45.123456789Z") == T0_NS
    assert parse_rfc3339_ns("2024-05-09T12:34:45Z") == T0_NS - 123456789
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_rfc3339_ns("yesterday")


def test_parser_fills_a_level_from_k6_points() -> None:
    acc = LevelAccumulator(Slo(), False, 1_000_000)
    acc.offset_ns = 0
    points = K6Points(acc)
    lines = [
        json.dumps({"type": "Metric", "data": {"type": "trend", "contains": "time", "tainted": None,
                    "thresholds": [], "submetrics": None}, "metric": "http_req_duration"}),
        _point("vus", T0, 4, None),
        # warm-up requests are not measured
        *_request_lines(_at(0), 50.0, WARMUP_SCENARIO, 200),
        _point(SENT_METRIC, _at(0), 1, {"scenario": WARMUP_SCENARIO}),
    ]  # fmt: skip
    durations = [5.291, 7.5, 12.25, 3.0]
    for i, ms in enumerate(durations):
        lines.append(_point(SENT_METRIC, _at(10 + i), 1, {"scenario": MEASURE_SCENARIO}))
        lines += _request_lines(_at(20 + i), ms, MEASURE_SCENARIO, 200)
    failures = [(503, 1503), (0, 1212), (0, 1050), (0, 1220), (0, 1000)]
    for i, (status, code) in enumerate(failures):
        lines.append(_point(SENT_METRIC, _at(30 + i), 1, {"scenario": MEASURE_SCENARIO}))
        lines += _request_lines(_at(40 + i), 1.0, MEASURE_SCENARIO, status, code)
    lines.append(_point("dropped_iterations", _at(50), 2, {"scenario": MEASURE_SCENARIO}))
    # two sends with no answer: cut off when the level stopped
    lines.append(_point(SENT_METRIC, _at(60), 1, {"scenario": MEASURE_SCENARIO}))
    lines.append(_point(SENT_METRIC, _at(61), 1, {"scenario": MEASURE_SCENARIO}))
    for line in lines:
        points(line)
    assert points.requests == 1 + len(durations) + len(failures)
    assert points.add_cut_offs(end_ns=parse_rfc3339_ns(_at(90))) == 2
    level = acc.to_result(CLOSED)
    assert level.completed == len(durations)
    assert level.dropped == 2
    assert level.errors == {
        ErrorKind.CONNECT: 1,
        ErrorKind.DISCONNECTED: 1,
        ErrorKind.DROPPED: 2,
        ErrorKind.HTTP_STATUS: 1,
        ErrorKind.OTHER: 1,
        ErrorKind.TIMEOUT: 3,  # 1050 and the two cut-offs
    }
    e2e = level.histogram("e2e")
    assert e2e is not None and e2e.count == len(durations)
    assert level.latency["e2e"].max_ms == pytest.approx(max(durations), rel=1e-3)
    assert level.latency["e2e"].min_ms == pytest.approx(min(durations), rel=1e-3)
    # A request was sent its duration before its points' time (k6 stamps the end).
    sends = [parse_rfc3339_ns(_at(20 + i)) - round(ms * 1e6) for i, ms in enumerate(durations)]
    assert level.first_start_unix_ns == min(sends)
    assert CUT_OFF  # cut-offs carry the same detail as the built-in engine's


def test_classify_k6_error_codes() -> None:
    assert classify(200, None) is None
    assert classify(404, None) is ErrorKind.HTTP_STATUS
    assert classify(404, 1404) is ErrorKind.HTTP_STATUS
    assert classify(0, 1211) is ErrorKind.TIMEOUT
    assert classify(0, 1101) is ErrorKind.CONNECT
    assert classify(0, 1301) is ErrorKind.CONNECT
    assert classify(0, 1201) is ErrorKind.DISCONNECTED
    assert classify(0, None) is ErrorKind.OTHER


def test_summary_and_console_parsing() -> None:
    summary = {"metrics": {"http_reqs": {"count": 42, "rate": 8.4}, "iterations": {"count": 42}}}
    assert summary_http_reqs(json.dumps(summary)) == 42
    assert summary_http_reqs(json.dumps({"metrics": {}})) is None
    console = (
        'time="2024-05-09T12:00:00Z" level=info msg="mcp-bench-server=mcp-refserver/0.1.0" source=console\n'
    )
    assert server_from_console(console) == {"server_name": "mcp-refserver", "server_version": "0.1.0"}
    assert server_from_console("nothing here\n") == {}


# -- a real k6, only where the user supplied one --------------------------------------------------
@pytest.mark.k6
@pytest.mark.skipif(shutil.which("k6") is None, reason=NO_K6)
async def test_real_k6_run_against_the_reference_server() -> None:
    async with await start_refserver() as srv:
        closed = RunPlan.from_dict(
            {"url": f"{srv.url}/delay?ms=2", "engine": "k6", "levels": {"concurrency": [2]},
             "stage": {"warmup_s": 0.3, "requests": 20}}
        )  # fmt: skip
        doc = await K6Engine().run(closed)
        (level,) = doc.levels
        assert doc.engine.engine == "k6" and doc.engine.engine_version
        assert doc.engine.server_name == "mcp-refserver"
        assert level.completed == 20 and level.failed == 0
        assert level.latency["e2e"].min_ms is not None and level.latency["e2e"].min_ms >= 2.0
        open_plan = RunPlan.from_dict(
            {"url": f"{srv.url}/delay?ms=1", "engine": "k6", "stage": {"duration_s": 1},
             "levels": {"rate": [20], "arrival": "constant", "overload": "drop", "max_concurrency": 4}}
        )  # fmt: skip
        doc = await K6Engine().run(open_plan)
        (level,) = doc.levels
        assert 15 <= level.sent <= 25 and level.failed == 0
        assert any(OPEN_LOOP_NOTE in n for n in doc.notes)


def test_feature_check_needs_no_k6_binary() -> None:
    from mcp_bench.engines import plan_feature_problem
    from mcp_bench.plan import RunPlan

    plan = RunPlan.from_dict(
        {"url": "http://127.0.0.1:1/", "engine": "k6", "levels": {"rate": [10.0]}, "stage": {"requests": 5}}
    )
    problem = plan_feature_problem(plan)  # poisson arrivals: k6 runs constant arrival rates only
    assert problem is not None and problem.startswith("levels.arrival")
    ok = plan.model_copy(
        update={"levels": plan.levels.model_copy(update={"arrival": "constant", "overload": "drop"})}
    )
    assert plan_feature_problem(ok) is None
