"""The catalogue of detectors: the built-in ones (importing :mod:`mcp_bench.diagnose.detectors`
registers them) and any registered since, and running them all. Above both the registry and the
detectors, so the registry never imports the detectors that import it."""

from __future__ import annotations

from collections.abc import Mapping

import mcp_bench.diagnose.detectors  # noqa: F401  (registers the built-in detectors)
from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, registered
from mcp_bench.diagnose.thresholds import Overrides


def all_detectors() -> list[Detector]:
    """Every detector, the screening first, then by trap number."""
    return registered()


def known_thresholds() -> dict[int, tuple[str, Mapping[str, float]]]:
    return {d.trap: (d.key, d.thresholds) for d in all_detectors()}


def run_detectors(inputs: DiagnoseInputs, overrides: Overrides | None = None) -> list[Finding]:
    """One finding per detector; a detector that raises on odd data says NoData with the error,
    so one bad input never hides the other findings."""
    out = []
    for d in all_detectors():
        try:
            out.append(d.run(inputs, (overrides or {}).get(d.trap)))
        except (ValueError, KeyError, TypeError, ZeroDivisionError, AttributeError) as exc:
            out.append(
                d.no_data(
                    f"could not read its data: {type(exc).__name__}: {exc}",
                    d.thresholds,
                    needs=d.needs,
                )
            )
    return out


__all__ = ["all_detectors", "known_thresholds", "run_detectors"]
