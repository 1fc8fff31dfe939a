"""Structured logs: one JSON object per line with the object a line is about and the evaluation
under way, readable text on a terminal, and no credential in either."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from kopf._core.actions.loggers import ObjectLogger

from mcp_operator import logs
from mcp_operator.cli import build_parser, main
from mcp_operator.handlers.common import about_object, current_object

TOKEN = "s3cr3t-T0KEN"
BODY = {
    "apiVersion": "mcp2026.io/v1alpha1",
    "kind": "MCPReadiness",
    "metadata": {"namespace": "team-a", "name": "gate", "uid": "u-1"},
}


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    """The root logger as the test found it, restored afterwards."""
    logger = logging.getLogger()
    handlers, level = list(logger.handlers), logger.level
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logging.captureWarnings(False)


def _setup(fmt: str, **kwargs: Any) -> io.StringIO:
    stream = io.StringIO()
    logs.setup(fmt, stream=stream, source=current_object, **kwargs)
    return stream


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_carries_time_level_logger_message(root: logging.Logger) -> None:
    stream = _setup("json")
    logging.getLogger("mcp_operator.x").info("hello %s", "world")
    (line,) = _lines(stream)
    assert line["level"] == "info" and line["logger"] == "mcp_operator.x" and line["message"] == "hello world"
    stamp = dt.datetime.fromisoformat(line["time"].replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 60
    assert line["time"].endswith("Z")
    assert not {"namespace", "name", "evaluation"} & line.keys()  # nothing known, nothing claimed


def test_kopf_object_logger_lines_name_their_object(root: logging.Logger) -> None:
    """The ``logger`` kopf hands a handler carries the object: its lines say which."""
    stream = _setup("json")
    ObjectLogger(body=kopf.Body(BODY), settings=kopf.OperatorSettings()).info("probing %d", 3)
    (line,) = _lines(stream)
    assert line["namespace"] == "team-a" and line["name"] == "gate" and line["kind"] == "MCPReadiness"
    assert line["logger"] == "kopf.objects" and line["message"] == "probing 3"


async def test_module_loggers_inside_a_handler_and_its_tasks_name_the_object(root: logging.Logger) -> None:
    """A module-level logger used in a handler (and in a task the handler starts, as a drill
    does) is attributed through the object every handler binds from the body kopf hands it
    (``handlers.common.about_object``)."""
    stream = _setup("json")
    log = logging.getLogger("mcp_operator.handlers.readiness")
    started: list[asyncio.Task[None]] = []

    async def task() -> None:
        await asyncio.sleep(0)
        log.warning("from the drill task")

    @about_object
    async def handler(body: kopf.Body, **_: Any) -> None:
        log.info("in the handler")
        started.append(asyncio.create_task(task()))

    await handler(body=kopf.Body(BODY))
    log.info("outside any handler")
    await started[0]
    inside, outside, from_task = _lines(stream)
    assert (inside["namespace"], inside["name"]) == ("team-a", "gate")
    assert (from_task["namespace"], from_task["name"], from_task["level"]) == ("team-a", "gate", "warning")
    assert "name" not in outside


async def test_evaluation_id_is_stamped_inside_its_block_and_tasks(root: logging.Logger) -> None:
    stream = _setup("json")
    log = logging.getLogger("mcp_operator.readiness")
    with logs.about("team-a", "gate", "MCPReadiness"), logs.evaluation("0123abcd4567"):
        log.info("round started")
        await asyncio.create_task(asyncio.to_thread(lambda: None))  # a thread hop does not matter
        task = asyncio.create_task(asyncio.sleep(0, result=None))
        await task
        log.info("round done")
    log.info("after")
    started, done, after = _lines(stream)
    for line in (started, done):
        assert line["evaluation"] == "0123abcd4567"
        assert (line["namespace"], line["name"], line["kind"]) == ("team-a", "gate", "MCPReadiness")
    assert "evaluation" not in after and "name" not in after


def test_an_explicit_object_wins_over_the_context(root: logging.Logger) -> None:
    stream = _setup("json")
    with logs.about("ns-context", "from-context"):
        ObjectLogger(body=kopf.Body(BODY), settings=kopf.OperatorSettings()).info("x")
        logging.getLogger("y").info("y")
    kopf_line, plain = _lines(stream)
    assert kopf_line["name"] == "gate" and plain["name"] == "from-context"


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_credentials_never_reach_the_output(root: logging.Logger, fmt: str) -> None:
    """The redacting filter sits on the root handler: a URL with a token, in the message, in its
    arguments or in a traceback, is written with the token replaced."""
    stream = _setup(fmt)
    log = logging.getLogger("urllib3.connectionpool")
    url = f"http://user:{TOKEN}@triton:8000/v2/health/ready?token={TOKEN}&a=1"
    log.info("GET %s", url)
    log.info(f"retrying {url}")
    try:
        raise ConnectionError(f"cannot connect to {url}")
    except ConnectionError:
        log.exception("probe failed")
    out = stream.getvalue()
    assert TOKEN not in out
    assert out.count("http://REDACTED@triton:8000/v2/health/ready?token=REDACTED&a=REDACTED") == 3
    if fmt == "json":
        lines = _lines(stream)
        assert len(lines) == 3 and "ConnectionError" in lines[2]["exception"]


def test_what_kopf_posts_as_an_event_is_redacted_too(root: logging.Logger) -> None:
    """kopf posts an object logger's lines as events through its own handler (``K8sPoster``),
    which the root handler's filter never sees: the handler kopf posts through formats the
    message and its traceback redacted (issue 35, item 1)."""
    _setup("json")
    (poster,) = [h for h in logging.getLogger("kopf.objects").handlers if type(h).__name__ == "K8sPoster"]
    url = f"http://h:8000/v1;sid={TOKEN}?model={TOKEN}#{TOKEN}"
    try:
        raise ConnectionError(f"cannot connect to {url} with Authorization: Bearer {TOKEN}")
    except ConnectionError as exc:
        record = logging.LogRecord(
            "kopf.objects", logging.ERROR, __file__, 1, "Handler failed: %s", (exc,), (type(exc), exc, None)
        )
    posted = poster.format(record)
    assert TOKEN not in posted
    assert "http://h:8000/v1;sid=REDACTED?model=REDACTED#REDACTED" in posted and "ConnectionError" in posted


def test_text_format_prefixes_the_object_and_evaluation(root: logging.Logger) -> None:
    stream = _setup("text")
    with logs.about("team-a", "gate"), logs.evaluation("e1"):
        logging.getLogger("mcp").warning("slow round")
    line = stream.getvalue().strip()
    assert line.endswith("WARNING mcp: [team-a/gate] slow round (evaluation e1)")


def test_default_is_text_on_a_terminal_and_json_elsewhere() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert logs.default_format(Tty()) == "text"
    assert logs.default_format(io.StringIO()) == "json"
    with pytest.raises(ValueError, match="unknown log format 'yaml'"):
        logs.make_formatter("yaml")


def test_setup_replaces_its_own_handler_and_sets_the_level(root: logging.Logger) -> None:
    first = _setup("json")
    second = _setup("text", verbose=True)
    ours = [h for h in root.handlers if isinstance(h, logs._OperatorHandler)]
    assert len(ours) == 1 and root.level == logging.DEBUG
    logging.getLogger("z").debug("only once")
    assert first.getvalue() == "" and "only once" in second.getvalue()
    _setup("json")
    assert root.level == logging.INFO
    logging.getLogger("aiohttp.access").info("GET /healthz 200")  # the liveness probe's line
    assert logging.getLogger("aiohttp.access").getEffectiveLevel() == logging.WARNING
    _setup("json", verbose=True)
    assert logging.getLogger("aiohttp.access").getEffectiveLevel() == logging.DEBUG


def test_warnings_become_log_lines(root: logging.Logger) -> None:
    stream = _setup("json")
    import warnings

    warnings.warn("old API", DeprecationWarning, stacklevel=1)
    (line,) = _lines(stream)
    assert line["logger"] == "py.warnings" and "old API" in line["message"]


def test_cli_log_format_flag_and_env(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser()
    assert parser.parse_args(["run", "--log-format", "json"]).log_format == "json"
    assert parser.parse_args(["run"]).log_format in (None, "json", "text")
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--log-format", "yaml"])
    monkeypatch.setenv("MCP_LOG_FORMAT", "yaml")
    assert main(["run"]) == 2  # refused before kopf starts
    assert "unknown log format 'yaml'" in capsys.readouterr().err
