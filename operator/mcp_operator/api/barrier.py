"""MCPBenchmark's start barrier (shards start each level together) and its live progress."""

from __future__ import annotations

from pydantic import Field

from .common import ApiModel


class StartBarrierSpec(ApiModel):
    """Shards of a run of more than one shard wait, once their connections are open, for a common
    start time of each level that the operator writes when every running shard is waiting;
    levels whose shard windows overlapped less than minOverlap are flagged, not reported as
    cluster-wide figures."""

    enabled: bool = Field(
        default=True, description="Wait for a common start time of each level (runs of several shards)."
    )
    every_level: bool = Field(
        default=True,
        description="Wait at every level; false: only the first, the later levels following back to back "
        "(a drill stage's windows: one load, no pause between them), and also for a single shard, so "
        "the run's start time is known (a drill times its faults from it).",
    )
    min_overlap: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="Least share of a level's time (first send to last end, any shard) that every shard "
        "must have run in for the merged level to count as a cluster-wide figure.",
    )
    timeout_seconds: int = Field(
        default=600,
        ge=1,
        le=86400,
        description="How long a shard waits for a level's start time before it starts alone (the level "
        "is then most likely flagged).",
    )


class BenchmarkProgress(ApiModel):
    """Where a running benchmark is, from what its shards report (each through its own progress
    object, signed with the run's key, at most every few seconds)."""

    level: str = Field(description="Level being run, i/n (the furthest behind of the running shards).")
    sent: int = Field(default=0, ge=0, description="Requests sent so far, all shards and levels.")
    completed: int = Field(default=0, ge=0, description="Requests completed so far.")
    errors: int = Field(default=0, ge=0, description="Requests failed so far.")
    in_flight: int = Field(default=0, ge=0, description="Requests sent and not answered yet.")
    rate_rps: str = Field(default="n/a", description="Requests answered per second in the current level.")
    eta_seconds: int | None = Field(
        default=None, ge=0, description="Estimated seconds until the last shard is done."
    )
    shards_reporting: int = Field(default=0, ge=0, description="Shards whose progress counts.")
    barrier: str = Field(
        default="",
        description="The start barrier: which level waits for how many shards, or when it starts.",
        max_length=256,
    )
    updated_at: str | None = Field(default=None, description="When the newest report was written.")
