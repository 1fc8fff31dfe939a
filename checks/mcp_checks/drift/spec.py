"""What the recording-rule drift check compares, and against which threshold."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..defaults import DEFAULT_THRESHOLD, DRIFT_TIMEOUT_S
from ..dialhooks import OPEN, DialHooks
from .reference import RuleReference

__all__ = ["DEFAULT_THRESHOLD", "MetricDriftSpec", "RecordingRule"]


@dataclass(frozen=True)
class RecordingRule:
    """A recording rule by its record name; ``expr`` (and the ``labels`` the rule adds) when
    given is the independent reference for this rule, else the check's ``reference`` says what
    the rule should be. Without either there is nothing independent to compare with: the
    expression Prometheus reports is the one under test."""

    record: str
    expr: str | None = None
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MetricDriftSpec:
    """``at`` is the evaluation time (Unix seconds, default now); with ``window_s`` and
    ``points`` > 1 the comparison repeats at evenly spaced instants over the window before
    ``at``, and each series keeps its worst drift. Drift >= ``threshold`` fails; drift >=
    ``warn_threshold`` (below ``threshold``) warns. ``reference`` holds the expected rules
    (PrometheusRule objects, a rules file) for the rules given without ``expr``."""

    prometheus_url: str
    rules: tuple[RecordingRule, ...]
    threshold: float = DEFAULT_THRESHOLD
    warn_threshold: float | None = None
    at: float | None = None
    window_s: float = 0.0
    points: int = 1
    timeout_s: float = DRIFT_TIMEOUT_S
    headers: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    reference: RuleReference | None = field(default=None, hash=False, compare=False)
    dial: DialHooks = field(default=OPEN, hash=False, compare=False)  # the operator's target policy

    def __post_init__(self) -> None:
        if not self.rules:
            raise ValueError("name at least one recording rule")
        if len({r.record for r in self.rules}) != len(self.rules):
            raise ValueError("recording rules must be unique")
        if not self.threshold > 0:
            raise ValueError("threshold must be > 0")
        if self.warn_threshold is not None and not 0 < self.warn_threshold < self.threshold:
            raise ValueError("warn_threshold must be > 0 and below threshold")
        if self.points < 1 or self.window_s < 0 or (self.points > 1 and self.window_s == 0):
            raise ValueError("points >= 1, and a window > 0 when points > 1")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")

    def instants(self, now: float) -> list[float]:
        end = self.at if self.at is not None else now
        if self.points == 1:
            return [end]
        step = self.window_s / (self.points - 1)
        return [end - self.window_s + i * step for i in range(self.points)]
