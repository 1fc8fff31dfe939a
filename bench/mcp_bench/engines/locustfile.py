"""The locustfile the Locust engine runs: one level of a run plan, per-request records to a file.

Runs inside the Locust process (gevent, monkey-patched), so it imports only the standard library,
gevent and Locust; never ``mcp_bench``. The parent passes the level as JSON through the
``MCP_BENCH_LOCUST_CONFIG`` file and reads back two files:

* ``records``: one tab-separated line per request, written from Locust's own ``request`` event
  (Locust's start time and response time, so the figures are the ones Locust measured):
  ``measured  scheduled_ns  sent_ns  end_ns  status  error_kind  detail`` (Unix ns; ``-`` for none).
* ``meta``: JSON with the server header, the stop reason and the measurement window.

Closed loop: ``users = concurrency``, no wait time. Open loop: ``users = max_concurrency`` share the
pre-computed arrival schedule; each free user takes the next arrival, sleeps until it is due and
sends it, so an arrival with no free user leaves late (the plan's ``overload: late``) and every
record carries its scheduled instant. No request leaves before Locust has spawned every user: the
level's clock starts then.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

import gevent
import gevent.event
from locust import FastHttpUser, constant, events, task
from locust.env import Environment
from locust.exception import StopUser

# Spelled the same in mcp_bench.engines.locust (this file must not import mcp_bench).
CONFIG_ENV = "MCP_BENCH_LOCUST_CONFIG"
CUT_OFF_MARK = "cut_off"
LEAD_NS = 20_000_000  # first arrival this long after spawning completes, so it is not born late
POLL_S = 0.01
# gevent's timers wake up to ~1 ms late: sleep until this long before an arrival, then yield in a loop.
SPIN_NS = 1_500_000


def _load_config() -> dict[str, Any]:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise RuntimeError(f"{CONFIG_ENV} is not set: this locustfile is run by mcp-bench's Locust engine")
    with open(path, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


CFG = _load_config()


def classify(exception: BaseException | None, status: int) -> str:
    """The mcp-bench error kind of one failed request (``ErrorKind`` values)."""
    if status >= 400:
        return "http_status"
    seen: list[BaseException] = []
    exc: BaseException | None = exception
    while exc is not None and len(seen) < 5:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    for e in seen:
        if isinstance(e, TimeoutError | socket.timeout | gevent.Timeout):
            return "timeout"
        if isinstance(e, ConnectionRefusedError | socket.gaierror):
            return "connect"
        if isinstance(e, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
            return "disconnected"
    names = " ".join(type(e).__name__ for e in seen)
    text = " ".join(str(e) for e in seen).lower()
    if "timeout" in names.lower() or "timed out" in text:
        return "timeout"
    if "refused" in text or "name or service not known" in text:
        return "connect"
    if "connectionclosed" in names.lower() or "closed" in text or "reset" in text:
        return "disconnected"
    if "parse" in names.lower() or "protocol" in names.lower():
        return "malformed"
    return "other"


class _Level:
    """The level's shared state (greenlets are cooperative, so plain counters are safe)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.open_loop = cfg["mode"] == "open"
        self.offsets: list[int] = cfg.get("offsets_ns") or []
        self.warmup_count: int = cfg.get("warmup_count", 0)
        self.requests: int | None = cfg.get("requests")
        self.next_arrival = 0  # arrivals taken by a user (it may still be waiting for the due time)
        self.sent_arrivals = 0  # arrivals whose request has been sent
        self.issued = 0
        self.stopping = False
        self.started = False
        self.go = gevent.event.Event()
        self.t0_ns: int | None = None
        self.measure_start_ns: int | None = None
        self.measure_end_ns: int | None = None
        self.inflight: dict[int, tuple[int, int | None, bool]] = {}
        self.server = ""
        self.stop_reason = ""
        self.out = open(cfg["records"], "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115

    def write(
        self, measured: bool, sched: int | None, sent: int, end: int, status: int, kind: str, detail: str
    ) -> None:
        detail = detail.replace("\t", " ").replace("\n", " ")[:200] or "-"
        self.out.write(
            f"{int(measured)}\t{'-' if sched is None else sched}\t{sent}\t{end}\t{status}\t{kind}\t{detail}\n"
        )


LEVEL = _Level(CFG)


@events.request.add_listener
def _on_request(
    response_time: float,
    response: Any,
    context: dict[str, Any],
    exception: BaseException | None,
    start_time: float,
    **_: Any,
) -> None:
    mark = context.get("mcp_bench")
    if mark is None:
        return
    measured, sched = mark
    sent = int(start_time * 1e9)
    end = sent + int(response_time * 1e6)
    status = int(getattr(response, "status_code", 0) or 0)
    if not LEVEL.server and response is not None and status:
        headers = getattr(response, "headers", None) or {}
        LEVEL.server = str(headers.get("Server") or headers.get("server") or "")
    if exception is None:
        LEVEL.write(measured, sched, sent, end, status, "-", "")
    else:
        LEVEL.write(measured, sched, sent, end, status, classify(exception, status), repr(exception))


def _controller(environment: Environment) -> None:
    """Start the level's clock, stop it at its end, drain in-flight requests, then quit Locust."""
    cfg = CFG
    t0 = time.time_ns() + (LEAD_NS if LEVEL.open_loop else 0)
    LEVEL.t0_ns = t0
    LEVEL.go.set()
    LEVEL.measure_start_ns = t0 + int(cfg["warmup_s"] * 1e9)
    duration = cfg.get("duration_s")
    if duration is not None and not LEVEL.open_loop:
        LEVEL.measure_end_ns = LEVEL.measure_start_ns + int(duration * 1e9)
    while True:
        gevent.sleep(POLL_S)
        now = time.time_ns()
        if LEVEL.open_loop:
            if LEVEL.sent_arrivals >= len(LEVEL.offsets):
                LEVEL.stop_reason = "requests" if LEVEL.requests is not None else "duration"
                break
        elif LEVEL.measure_end_ns is not None and now >= LEVEL.measure_end_ns:
            LEVEL.stop_reason = "duration"
            break
        elif LEVEL.requests is not None and LEVEL.issued >= LEVEL.requests:
            LEVEL.stop_reason = "requests"
            break
    LEVEL.stopping = True
    deadline = time.time_ns() + int(cfg["drain_s"] * 1e9)
    while LEVEL.inflight and time.time_ns() < deadline:
        gevent.sleep(POLL_S)
    now = time.time_ns()
    for sent, sched, measured in list(LEVEL.inflight.values()):
        LEVEL.write(measured, sched, sent, now, 0, "timeout", CUT_OFF_MARK)
    LEVEL.inflight.clear()
    LEVEL.out.flush()
    with open(cfg["meta"], "w", encoding="utf-8") as f:
        json.dump(
            {
                "server": LEVEL.server,
                "stop_reason": LEVEL.stop_reason,
                "t0_ns": LEVEL.t0_ns,
                "measure_start_ns": LEVEL.measure_start_ns,
            },
            f,
        )
    assert environment.runner is not None
    environment.runner.quit()


@events.spawning_complete.add_listener
def _on_spawned(user_count: int, **_: Any) -> None:
    if not LEVEL.started:
        LEVEL.started = True
        gevent.spawn(_controller, _ENV[0])


_ENV: list[Environment] = []


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    _ENV.append(environment)


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    LEVEL.out.close()


class McpBenchUser(FastHttpUser):
    """Sends the plan's request; closed loop back to back, open loop at the scheduled instants."""

    wait_time = constant(0)
    network_timeout = float(CFG["timeout_s"])
    connection_timeout = float(CFG["timeout_s"])
    host = CFG["host"]

    def _send(self, measured: bool, sched: int | None) -> None:
        key = id(gevent.getcurrent())
        LEVEL.inflight[key] = (time.time_ns(), sched, measured)
        try:
            self.client.request(
                CFG["method"],
                CFG["url"],
                name="mcp-bench",
                data=CFG.get("body"),
                headers=CFG.get("headers") or None,
                context={"mcp_bench": (measured, sched)},
            )
        finally:
            LEVEL.inflight.pop(key, None)

    @task
    def level(self) -> None:
        if LEVEL.stopping:
            raise StopUser()
        if LEVEL.t0_ns is None:
            LEVEL.go.wait()  # no request before every user is spawned: the level's clock starts then
            return
        if LEVEL.open_loop:
            self._arrival()
        else:
            self._closed()

    def _closed(self) -> None:
        assert LEVEL.measure_start_ns is not None
        measured = time.time_ns() >= LEVEL.measure_start_ns
        if measured and LEVEL.requests is not None:
            if LEVEL.issued >= LEVEL.requests:
                raise StopUser()
            LEVEL.issued += 1
        self._send(measured, None)

    def _arrival(self) -> None:
        idx = LEVEL.next_arrival
        if idx >= len(LEVEL.offsets):
            raise StopUser()
        LEVEL.next_arrival = idx + 1
        assert LEVEL.t0_ns is not None
        due = LEVEL.t0_ns + LEVEL.offsets[idx]
        wait_ns = due - time.time_ns() - SPIN_NS
        if wait_ns > 0:
            gevent.sleep(wait_ns / 1e9)
        while time.time_ns() < due:
            gevent.sleep(0)
        LEVEL.sent_arrivals += 1
        self._send(idx >= LEVEL.warmup_count, due)
