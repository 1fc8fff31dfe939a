"""The MCP2026 profile scaled down: every stage keeps a rate and a duration a stage can take."""

from __future__ import annotations

import pytest

from mcp_operator.readiness.drill.profile import MIN_RATE, MIN_SECONDS, mcp2026_stages


@pytest.mark.parametrize("scale", [1.0, 0.01, 1e-4, 1e-7])
def test_a_scaled_profile_keeps_a_rate_and_a_duration(scale: float) -> None:
    """A generated spec found it: ``scale: 1e-7`` rounded the baseline's rate to 0, which no
    stage takes, and the drill ended in a traceback instead of a verdict (issue 35, item 8)."""
    stages = mcp2026_stages(scale)
    assert [s.name for s in stages] == ["baseline", "mixed", "spike"]
    for stage in stages:
        assert stage.load is not None and stage.load.rate is not None
        assert stage.load.rate >= MIN_RATE and stage.load.duration_seconds is not None
        assert stage.load.duration_seconds >= MIN_SECONDS
    if scale == 1.0:
        assert [s.load.rate for s in stages if s.load] == [500.0, 3200.0, 8960.0]
