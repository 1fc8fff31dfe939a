"""The MCPReadiness ticks (``handlers.periodic``): no kopf timer or daemon on the resource (kopf
would hold every gate's whole body for them), and each tick wanted exactly where the kopf filter
it replaces matched."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from mcp_operator.handlers import periodic

DECIDED = {"phase": "Succeeded"}
RETRY = {"attempts": 1, "nextAt": "2026-12-06T00:00:00Z"}
WANTED = {tick.name: tick.wanted for tick in periodic.TICKS}


def test_no_kopf_timer_or_daemon_watches_mcpreadiness() -> None:
    spawning = kopf.get_default_registry()._spawning.get_all_handlers()
    plurals = {h.selector.any_name for h in spawning if h.selector is not None}
    assert "mcpreadinesses" not in plurals, plurals
    assert "mcpbenchmarks" in plurals  # the check would see one: the benchmark's collect timer


@pytest.mark.parametrize(
    ("tick", "spec", "status", "wanted"),
    [
        ("recheck_readiness", {"recheckIntervalSeconds": 60}, DECIDED, True),
        ("recheck_readiness", {"recheckIntervalSeconds": 60}, {"phase": "Running"}, False),
        ("recheck_readiness", {}, DECIDED, False),
        ("retry_readiness", {}, {"phase": "Failed", "retry": RETRY}, True),
        ("retry_readiness", {}, DECIDED, False),
        ("watch_release", {"watch": {"deployment": "d"}}, {"phase": "Running"}, True),
        ("watch_release", {"watch": {"deployment": "d"}}, DECIDED, True),
        ("watch_release", {"watch": {"deployment": "d"}, "suspend": True}, DECIDED, False),
        ("watch_release", {"watch": {"deployment": "d"}}, {}, False),
        ("watch_release", {}, DECIDED, False),
        ("sync_pod_gate", {"podReadinessGate": {"conditionType": "x"}}, {"phase": "Invalid"}, True),
        ("sync_pod_gate", {"podReadinessGate": {"conditionType": "x"}}, {"phase": "Running"}, False),
        ("sync_pod_gate", {}, DECIDED, False),
        ("retry_failed_reverts", {}, {"phase": "Ready", "faults": [{"phase": "RevertFailed"}]}, True),
        ("retry_failed_reverts", {}, {"phase": "Ready", "faults": [{"phase": "Reverted"}]}, False),
    ],
)
def test_each_tick_is_wanted_where_its_kopf_filter_matched(
    tick: str, spec: dict[str, Any], status: dict[str, Any], wanted: bool
) -> None:
    assert WANTED[tick](spec, status) is wanted
