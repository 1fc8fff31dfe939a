"""The built-in MCP2026 profile: the reference readiness procedure's three stages and KPIs,
expanded into ordinary stages (so ``kubectl get -o yaml`` shows exactly what ran) and scaled
for small clusters and demos (``scale: 0.01`` runs 1% of the rate for 1% of the time;
``durationScale`` shortens the time alone).

The reference gives the rates (baseline 500 req/s, mixed 3200, spike +180% for 90 s); it does
not give baseline and mixed durations: this profile uses 60 s each.
"""

from __future__ import annotations

from ...api.drill import DrillSpec, Stage, StageLoad

BASELINE_RPS = 500.0
MIXED_RPS = 3200.0
SPIKE_FACTOR = 2.8  # +180%
STAGE_SECONDS = 60.0
SPIKE_SECONDS = 90.0
MIN_SECONDS = 1.0  # a scaled stage still measures something
MIN_RATE = 0.001  # and still has a rate: a scale such as 1e-7 rounded it to 0, which no stage takes


def _stage(name: str, rate: float, seconds: float, scale: float, path: str, duration_scale: float) -> Stage:
    duration = max(MIN_SECONDS, seconds * duration_scale)
    return Stage(
        name=name,
        load=StageLoad(
            rate=max(MIN_RATE, round(rate * scale, 3)),
            duration_seconds=round(duration, 3),
            path=path,
            window_seconds=round(max(MIN_SECONDS / 2, min(5.0, duration / 4)), 3),
        ),
    )


def mcp2026_stages(scale: float, path: str = "/health", duration_scale: float | None = None) -> list[Stage]:
    """``duration_scale`` (default ``scale``) shortens the stages without lowering the rates: the
    full profile's rates for a tenth of its time is ``scale=1, duration_scale=0.1``."""
    durations = scale if duration_scale is None else duration_scale
    return [
        _stage("baseline", BASELINE_RPS, STAGE_SECONDS, scale, path, durations),
        _stage("mixed", MIXED_RPS, STAGE_SECONDS, scale, path, durations),
        _stage("spike", MIXED_RPS * SPIKE_FACTOR, SPIKE_SECONDS, scale, path, durations),
    ]


def expand(drill: DrillSpec, path: str = "/health") -> list[Stage]:
    """The stages that run: the spec's own, else the profile's; faults of a same-named spec
    stage are added to the profile's stage, so a profile can carry faults."""
    if drill.profile is None:
        return list(drill.stages)
    stages = mcp2026_stages(drill.scale, path, drill.duration_scale)
    if drill.mix:  # the mixed stage as a traffic mix instead of the health path alone
        stages = [
            s.model_copy(update={"load": s.load.model_copy(update={"classes": list(drill.mix)})})
            if s.name == "mixed" and s.load is not None
            else s
            for s in stages
        ]
    extra = {s.name: s for s in drill.stages}
    out = []
    for stage in stages:
        given = extra.pop(stage.name, None)
        if given is not None:
            stage = stage.model_copy(update={"faults": given.faults, "load": given.load or stage.load})
        out.append(stage)
    return out + list(extra.values())
