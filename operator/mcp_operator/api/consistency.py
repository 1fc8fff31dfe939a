"""spec.consistency: probe requests answered at rest and during every level, whose answers under
load are compared with those at rest (mcp_bench.consistency); a level whose outputs drift past a
threshold is a finding, whatever its latency."""

from __future__ import annotations

from mcp_bench.models import Consistency

from .common import ApiModel
from .engine import engine_rules


# Fields and defaults: mcp_bench.plan.Consistency, the plan's section (its interval_s is spelt
# intervalSeconds here). No docstring: the CRD shows the field's description of spec.consistency.
class ConsistencySpec(Consistency, ApiModel):
    model_config = engine_rules()

    def plan(self) -> dict[str, object]:
        """The plan's consistency section (mcp_bench.plan.Consistency)."""
        return self.model_dump(by_alias=False)
