"""The detectors, one per trap (and the screening), registered by the modules of
``mcp_bench.diagnose.detectors``, which import this module one way only;
:func:`mcp_bench.diagnose.catalog.run_detectors` runs each against the inputs.

A detector is a function of the inputs and its thresholds that answers one :class:`Finding`;
the :class:`Detector` record carries what every finding of it repeats (trap, name, advice, what
it needs) and builds the finding, so no detector can forget a field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_bench.diagnose.finding import FOUND, NO_DATA, NOT_FOUND, Finding, State, Value
from mcp_bench.diagnose.inputs import DiagnoseInputs

Check = Callable[["Detector", DiagnoseInputs, Mapping[str, float]], Finding]


@dataclass(frozen=True)
class Detector:
    trap: int
    key: str
    name: str
    advice: str
    needs: str  # what the detector reads, said when it has none of it
    thresholds: Mapping[str, float]
    check: Check = field(compare=False)

    def finding(
        self,
        state: State,
        summary: str,
        thresholds: Mapping[str, float],
        *,
        level: str | None = None,
        values: Mapping[str, Value] | None = None,
        source: str = "",
        needs: str = "",
    ) -> Finding:
        return Finding(
            trap=self.trap,
            key=self.key,
            name=self.name,
            state=state,
            summary=summary,
            level=level,
            values={k: _round(v) for k, v in (values or {}).items()},
            thresholds=dict(thresholds),
            source=source,
            advice=self.advice,
            needs=needs if state == NO_DATA else "",
        )

    def found(self, summary: str, thresholds: Mapping[str, float], **kw: Any) -> Finding:
        return self.finding(FOUND, summary, thresholds, **kw)

    def not_found(self, summary: str, thresholds: Mapping[str, float], **kw: Any) -> Finding:
        return self.finding(NOT_FOUND, summary, thresholds, **kw)

    def no_data(self, summary: str, thresholds: Mapping[str, float], needs: str = "", **kw: Any) -> Finding:
        return self.finding(NO_DATA, summary, thresholds, needs=needs or self.needs, **kw)

    def run(self, inputs: DiagnoseInputs, overrides: Mapping[str, float] | None = None) -> Finding:
        return self.check(self, inputs, {**self.thresholds, **(overrides or {})})


def _round(value: Value) -> Value:
    return round(value, 4) if isinstance(value, float) else value


_DETECTORS: dict[int, Detector] = {}


def register(detector: Detector) -> Detector:
    if detector.trap in _DETECTORS and _DETECTORS[detector.trap].key != detector.key:
        raise ValueError(f"trap {detector.trap} already has a detector ({_DETECTORS[detector.trap].key})")
    _DETECTORS[detector.trap] = detector
    return detector


def detector(
    trap: int, key: str, name: str, *, advice: str, needs: str, thresholds: Mapping[str, float]
) -> Callable[[Check], Detector]:
    """Decorator: ``@detector(3, "false-wait", ...)`` over ``def check(d, inputs, t) -> Finding``."""

    def wrap(check: Check) -> Detector:
        return register(Detector(trap, key, name, advice, needs, dict(thresholds), check))

    return wrap


def registered() -> list[Detector]:
    """The detectors registered so far, by trap number (the built-in ones register when
    :mod:`mcp_bench.diagnose.detectors` is imported; :mod:`mcp_bench.diagnose.catalog` does)."""
    return [_DETECTORS[t] for t in sorted(_DETECTORS)]


__all__ = [
    "FOUND",
    "NOT_FOUND",
    "NO_DATA",
    "Detector",
    "detector",
    "register",
    "registered",
]
