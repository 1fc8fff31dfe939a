"""GPU fairness of one sampled window: each GPU's mean SM utilisation as its share, judged by
:func:`mcp_bench.fairness.fairness` (which the shard merge and the detectors judge with too)."""

from __future__ import annotations

import math
from typing import Any

from mcp_bench.fairness import fairness
from mcp_bench.observed import STATUS_OK
from mcp_bench.telemetry.series import SampleWindow


def utilisation_shares(window: SampleWindow) -> dict[str, float]:
    """Mean SM utilisation of each GPU in a window, as a fraction; GPUs with no reading are left out."""
    shares: dict[str, float] = {}
    for gpu, per in zip(window.gpus, window.values, strict=True):
        real = [v for v in per.get("sm_util_pct", []) if not math.isnan(v)]
        if real and (gpu.index, "sm_util_pct") not in window.unsupported:
            shares[f"gpu{gpu.index}"] = math.fsum(real) / len(real) / 100.0
    return shares


def gpu_fairness(window: SampleWindow) -> dict[str, Any]:
    """Fairness across the GPUs of one window; ``no_data`` when no GPU has utilisation readings."""
    shares = utilisation_shares(window)
    if not shares:
        return {"status": "no_data", "reason": "no SM utilisation readings in the window"}
    return {"status": STATUS_OK, "shares": shares, **fairness(shares).to_dict()}
