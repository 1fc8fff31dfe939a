"""The drift check against HTTP servers that are not a healthy Prometheus: none at all, one
that answers junk, one that does not know the rule."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcp_checks.drift import MetricDriftSpec, RecordingRule, redact, run_metric_drift
from mcp_checks.verdict import Verdict

RULES = {"status": "success", "data": {"groups": [{"name": "g", "rules": []}]}}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def junk_prometheus() -> Iterator[str]:
    """/api/v1/rules knows no rule; /api/v1/query answers a vector that is not a list,
    or, for the query ``text``, something that is not JSON at all."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/api/v1/rules"):
                body = json.dumps(RULES).encode()
            elif "query=text" in self.path:
                body = b"<html>not prometheus</html>"
            else:
                body = json.dumps(
                    {"status": "success", "data": {"resultType": "x", "result": {"a": 1}}}
                ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


async def test_unreachable_prometheus_is_inconclusive_and_names_it() -> None:
    url = f"http://user:pw@127.0.0.1:{_closed_port()}"
    out = await run_metric_drift(MetricDriftSpec(url, (RecordingRule("r", expr="up"),), timeout_s=5))
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "PrometheusUnreachable")
    assert "pw" not in out.message + out.source and redact(url) in out.message


async def test_unknown_rule_is_inconclusive(junk_prometheus: str) -> None:
    out = await run_metric_drift(MetricDriftSpec(junk_prometheus, (RecordingRule("job:missing"),)))
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "RecordingRuleNotFound")
    assert "job:missing" in out.message and junk_prometheus in out.message


async def test_malformed_answers_are_errors(junk_prometheus: str) -> None:
    for expr in ("up", "text"):
        out = await run_metric_drift(MetricDriftSpec(junk_prometheus, (RecordingRule(expr, expr=expr),)))
        assert (out.outcome, out.reason) == (Verdict.ERROR, "MalformedPrometheusAnswer"), out.message


def test_redact_drops_credentials_and_query() -> None:
    assert redact("https://u:p@prom.example:9090/x?token=1") == "https://prom.example:9090/x"


def _proxied_through_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable a client might honour, pointing at a closed port."""
    proxy = f"http://127.0.0.1:{_closed_port()}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, proxy)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)


async def test_a_proxy_in_the_environment_is_not_used(
    junk_prometheus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prometheus is dialled itself, never through HTTP(S)_PROXY: the target policy judges the
    address dialled, and a proxy's would stand in for the target's (issue 35, item 5)."""
    _proxied_through_nothing(monkeypatch)
    out = await run_metric_drift(MetricDriftSpec(junk_prometheus, (RecordingRule("job:missing"),)))
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "RecordingRuleNotFound"), out.message
