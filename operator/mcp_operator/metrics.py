"""The operator's own Prometheus metrics, served on their own port next to kopf's liveness probe."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, get_args

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from .api.drill import FaultKind

RECONCILIATIONS = Counter(
    "mcp_operator_reconciliations_total", "Reconciliations by resource kind and outcome.", ["kind", "outcome"]
)
VERDICTS = Counter(
    "mcp_operator_verdicts_total", "Verdicts written, by resource kind and verdict.", ["kind", "verdict"]
)
CHECK_SECONDS = Histogram(
    "mcp_operator_check_duration_seconds",
    "Wall time of one check.",
    ["check"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
SHARD_RESULTS = Counter(
    "mcp_operator_shard_results_total", "Shard results read back, by outcome (merged, rejected).", ["outcome"]
)
ERRORS = Counter("mcp_operator_errors_total", "Runtime failures in handlers, by handler.", ["handler"])
API_RETRIES = Counter(
    "mcp_operator_api_retries_total", "Kubernetes API calls retried after a transient failure.", ["cause"]
)
READY = Gauge(
    "mcp_operator_readiness_ready", "1 when an MCPReadiness is Ready, else 0.", ["namespace", "name"]
)
ROUNDS_WAITING = Gauge(
    "mcp_operator_rounds_waiting",
    "MCPReadiness rounds waiting to be admitted (MCP_MAX_ROUNDS_ADMITTED run at once).",
)
LEADER = Gauge(
    "mcp_operator_leader",
    "1 while this process holds the leader Lease and runs the handlers, 0 on standby.",
)
FAULT_REVERT_FAILURES = Counter(
    "mcp_operator_fault_revert_failures_total",
    "Drill faults whose revert failed (journal phase RevertFailed), by fault kind.",
    ["kind"],
)
VERDICT_EVENTS_RESTORED = Counter(
    "mcp_operator_verdict_events_restored_total",
    "Verdict events a new leader posted because the operator died before posting them.",
)

# Every series an alert computes increase() or rate() over exists from the start, at 0: a counter
# born at 1 on its first event shows no increase, so that first event would never alert.
RESOURCE_KINDS = ("MCPReadiness", "MCPBenchmark")
VERDICT_VALUES = ("Pass", "Warn", "Inconclusive", "Fail", "Error")
FAULT_KINDS = get_args(FaultKind)  # every kind a drill can inject, from the API model
for _kind in RESOURCE_KINDS:
    for _verdict in VERDICT_VALUES:
        VERDICTS.labels(_kind, _verdict)
for _fault in FAULT_KINDS:
    FAULT_REVERT_FAILURES.labels(_fault)
ERRORS.labels("drill")  # a drill task's failure (handlers.readiness); handlers: counted_errors
ERRORS.labels("round")  # a round that raised, written as its verdict (readiness.round)
ERRORS.labels("start")  # a benchmark start that raised, written as its end (benchmark.start)


_SERVING: set[tuple[str, int]] = set()


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Start the metrics endpoint on ``address`` (MCP_METRICS_ADDRESS); port 0 disables it. Once
    per process: ``mcp-operator run`` serves it from the start (a standby is scraped too), and the
    startup handler's call is then a no-op."""
    if port and (address, port) not in _SERVING:
        start_http_server(port, addr=address)
        _SERVING.add((address, port))


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def counted_errors(handler: str) -> Callable[[F], F]:
    """Count a handler's failures before kopf logs them, posts a Warning event and retries."""

    ERRORS.labels(handler)  # the series exists, at 0, before the first failure

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except Exception:
                ERRORS.labels(handler).inc()
                raise

        return run  # type: ignore[return-value]

    return wrap
