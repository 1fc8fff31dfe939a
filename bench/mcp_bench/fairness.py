"""GPU fairness across GPUs or serving instances, from their utilisation.

The MCP 2026 readiness documents ask for std < 0.18, min/max > 0.65 and Jain index > 0.85. Shares are
utilisation fractions in 0..1 (mean SM utilisation / 100), so ``std`` is in the same unit; ``cv``
(std / mean) is reported beside it because Jain's index depends on it alone: J = 1 / (1 + cv^2).
The sampler (one window's GPUs), the shard merge (every GPU of a run) and the starvation
detector (serving instances) all judge with it, so it sits below them; standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

REFERENCE_STD_MAX = 0.18
REFERENCE_MIN_MAX_RATIO_MIN = 0.65
REFERENCE_JAIN_MIN = 0.85


@dataclass(frozen=True, slots=True)
class FairnessReport:
    """Fairness figures; ``meets_reference`` is None when fairness is undefined (fewer than two, no load)."""

    instances: int
    mean: float
    std: float
    cv: float | None
    min_max_ratio: float | None
    jain_index: float | None
    meets_reference: bool | None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fairness(shares: Mapping[str, float]) -> FairnessReport:
    """Std, min/max ratio and Jain index of per-instance utilisation fractions."""
    if not shares:
        raise ValueError("fairness needs at least one instance")
    values = list(shares.values())
    bad = {k: v for k, v in shares.items() if math.isnan(v) or not 0.0 <= v <= 1.0}
    if bad:
        raise ValueError(f"shares must be utilisation fractions within 0..1, got {bad}")
    n = len(values)
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
    top = max(values)
    squares = math.fsum(v * v for v in values)
    if top == 0.0:
        return FairnessReport(n, mean, std, None, None, None, None, "no load on any instance")
    cv = std / mean
    ratio = min(values) / top
    jain = math.fsum(values) ** 2 / (n * squares)
    if n < 2:
        return FairnessReport(n, mean, std, cv, ratio, jain, None, "fairness needs at least two instances")
    meets = std < REFERENCE_STD_MAX and ratio > REFERENCE_MIN_MAX_RATIO_MIN and jain > REFERENCE_JAIN_MIN
    return FairnessReport(n, mean, std, cv, ratio, jain, meets)
