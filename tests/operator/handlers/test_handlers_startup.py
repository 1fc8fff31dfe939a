"""Start-up: kopf's retried API requests are logged as retries, not errors. An API server still
filling its watch cache answers ``429 storage is (re)initializing``; kopf tries again and used
to log an ERROR line per attempt. Here kopf's own request function talks to a small HTTP server
that answers like that API server once, then serves the request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import kopf
import pytest
from aiohttp import web
from kopf._cogs.clients import api, auth, errors
from kopf._cogs.structs import credentials
from tests.httpserve import serving

from mcp_operator.handlers import startup
from mcp_operator.targets.unresolved import LOOKING_AGAIN

WATCHING = "kopf._cogs.clients.watching"  # the logger kopf's watch streams pass to its requests
STARTING = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "storage is (re)initializing",
    "reason": "TooManyRequests",
    "code": 429,
}


@pytest.fixture
def quiet_kopf() -> Iterator[list[str]]:
    """The filter on kopf's loggers as the startup handler installs it, removed afterwards."""
    names = startup.quiet_retries()
    yield names
    for name in names:
        logger = logging.getLogger(name)
        for found in [f for f in logger.filters if isinstance(f, startup.ApiRetryFilter)]:
            logger.removeFilter(found)


@pytest.fixture
async def apiserver() -> AsyncIterator[tuple[str, list[str]]]:
    """Answers each path with 429 ``storage is (re)initializing`` as often as the path's
    ``fail`` query says, then 200; ``500`` answers an internal error instead."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        failures = sum(1 for s in seen if s == request.path_qs)
        if failures <= int(request.query.get("fail", "0")):
            if request.query.get("code") == "500":
                return web.json_response(
                    {**STARTING, "message": "etcd leader changed", "code": 500}, status=500
                )
            return web.json_response(STARTING, status=429)
        return web.json_response({"kind": "APIResourceList", "resources": []})

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    async with serving(app) as url:
        yield url, seen


async def _get(server: str, path: str, attempts: int = 3) -> None:
    """One GET through kopf's request function, its retries a few milliseconds apart."""
    settings = kopf.OperatorSettings()
    settings.networking.error_backoffs = [0.01] * (attempts - 1)
    context = auth.APIContext(credentials.ConnectionInfo(server=server))
    try:
        response = await api.request(
            "get", path, settings=settings, context=context, logger=logging.getLogger(WATCHING)
        )
        response.release()
    finally:
        await context.session.close()


def _kopf_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == WATCHING]


async def test_an_api_server_that_is_starting_is_a_retry_at_info(
    apiserver: tuple[str, list[str]], quiet_kopf: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert WATCHING in quiet_kopf
    server, seen = apiserver
    caplog.set_level(logging.DEBUG, logger="kopf")
    await _get(server, "/apis/mcp2026.io/v1alpha1?fail=2")
    assert len(seen) == 3  # two 429s, then served
    lines = [line for line in _kopf_lines(caplog) if line[0] != "DEBUG"]
    assert [level for level, _ in lines] == ["INFO", "INFO"]
    first = lines[0][1]
    assert first.startswith(f"retrying GET {server}/apis/mcp2026.io/v1alpha1?fail=2: ")
    assert "the API server is not ready for it yet (429 storage is (re)initializing)" in first
    assert first.endswith("attempt #1/3 failed")


async def test_other_retried_failures_are_warnings_and_the_last_attempt_stays_an_error(
    apiserver: tuple[str, list[str]], quiet_kopf: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = apiserver
    caplog.set_level(logging.INFO, logger="kopf")
    await _get(server, "/api?fail=1&code=500")
    ((level, message),) = _kopf_lines(caplog)
    assert (
        level == "WARNING" and "APIServerError('etcd leader changed'" in message and "status=500" in message
    )
    caplog.clear()
    with pytest.raises(errors.APITooManyRequestsError):
        await _get(server, "/apis?fail=5", attempts=2)
    levels = [level for level, _ in _kopf_lines(caplog)]
    assert levels == ["INFO", "ERROR"]  # retried, then escalated: that one is an error


def test_the_filter_leaves_other_lines_alone() -> None:
    keep = startup.ApiRetryFilter()
    for level, message in [
        (logging.ERROR, "Handler 'evaluate_readiness' failed with an exception. Will retry."),
        (
            logging.WARNING,
            "Request attempt #1/9 failed; will retry: GET /x -> APIServerError('x', status=500)",
        ),
    ]:
        record = logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)
        assert keep.filter(record) and record.levelno == level and record.getMessage() == message


def test_a_handler_waiting_for_a_name_is_debug_not_an_error_every_15_s() -> None:
    """kopf logs the wait's retry at ERROR (and would post it as an event) every RETRY_S; the
    object's Ready condition and one event already say it: DEBUG, shown only when asked for."""
    quiet = startup.ApiRetryFilter()
    message = (
        "Handler 'evaluate_readiness' failed temporarily: spec.target.url: nowhere.invalid does not "
        f"resolve yet{LOOKING_AGAIN}"
    )
    logger = logging.getLogger("kopf.objects")
    before = logger.level
    try:
        logger.setLevel(logging.INFO)
        record = logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1, message, None, None)
        assert not quiet.filter(record) and record.levelname == "DEBUG"
        logger.setLevel(logging.DEBUG)
        record = logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1, message, None, None)
        assert quiet.filter(record) and record.levelno == logging.DEBUG
    finally:
        logger.setLevel(before)
    other = "Handler 'evaluate_readiness' failed temporarily: the API server answered 500"
    record = logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1, other, None, None)
    assert quiet.filter(record) and record.levelno == logging.ERROR  # any other retry stays an error


def test_the_success_of_a_handler_called_on_every_watch_event_is_debug() -> None:
    """``track_readiness`` runs on every event of every gate: its success line would be most of
    the log. Any other handler's success stays at INFO."""
    quiet = startup.ApiRetryFilter()
    logger = logging.getLogger("kopf.objects")
    before = logger.level
    try:
        logger.setLevel(logging.INFO)
        routine = "Handler 'track_readiness' succeeded."
        record = logging.LogRecord("kopf.objects", logging.INFO, __file__, 1, routine, None, None)
        assert not quiet.filter(record) and record.levelno == logging.DEBUG
        for kept in ("Handler 'evaluate_readiness' succeeded.", "Handler 'track_readiness' succeeded. x"):
            record = logging.LogRecord("kopf.objects", logging.INFO, __file__, 1, kept, None, None)
            assert quiet.filter(record) and record.levelno == logging.INFO
    finally:
        logger.setLevel(before)


async def test_the_startup_handler_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup.metrics, "serve", lambda *args, **kwargs: None)
    logger = logging.getLogger(WATCHING)
    before = list(logger.filters)
    try:
        await startup.configure(settings=kopf.OperatorSettings())
        await startup.configure(settings=kopf.OperatorSettings())  # once, however often it runs
        assert sum(isinstance(f, startup.ApiRetryFilter) for f in logger.filters) == 1
    finally:
        logger.filters[:] = before
