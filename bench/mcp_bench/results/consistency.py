"""A level's consistency judged: its figures against the plan's thresholds, and several shards'
(or worker processes') figures merged and judged again.

The figures are sums (probes, compared, token positions and mismatches) and a mergeable L2
histogram (:mod:`mcp_bench.results.l2spread`), so merging adds them: the merged mismatch rate is
pooled over every token compared and the merged P99 is over every distance. No comparison is
never a pass: ``NoData`` says why (no probe answer, no at-rest answer to compare with, or the
at-rest answers already disagreed, so there is no baseline to drift from). The observer that
counts the comparisons (``consistency``) and the shard merge and the views (``results`` and
above) all judge with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_bench.plan import Consistency
from mcp_bench.results.l2spread import L2Spread

FOUND, NOT_FOUND, NO_DATA = "Found", "NotFound", "NoData"


def judge(figures: dict[str, Any], cfg: Consistency) -> dict[str, Any]:
    """The counts with the figures derived from them and the state against the thresholds."""
    spread = L2Spread.decode(figures.get("l2_spread"))
    tokens = int(figures.get("tokens", 0))
    rate = figures["mismatched_tokens"] / tokens if tokens else None
    out = {
        **figures,
        "mismatch_rate": rate,
        "l2_kind": cfg.l2,
        "l2_max": spread.max,
        "l2_p99": spread.quantile(0.99),
        "threshold": {"l2": cfg.threshold_l2, "mismatch": cfg.threshold_mismatch},
    }
    state, reason = _state(out, cfg, spread)
    out["state"], out["reason"] = state, reason
    return out


def _state(f: dict[str, Any], cfg: Consistency, spread: L2Spread) -> tuple[str, str]:
    if f.get("unstable"):
        return NO_DATA, f"no baseline: {f['unstable']}"
    if not f["compared"]:
        return NO_DATA, (
            f"no probe answer compared ({f['probes']} sent, {f['failed']} failed, "
            f"{f.get('no_baseline', 0)} without an at-rest answer)"
            + (f": {f['error']}" if f.get("error") else "")
        )
    found = []
    if f["unmatched"]:
        found.append(f"{f['unmatched']} answers with outputs of another shape than at rest")
    rate = f["mismatch_rate"]
    if rate is not None and rate > cfg.threshold_mismatch:
        found.append(f"token mismatch {rate:.2%} > {cfg.threshold_mismatch:.2%}")
    if spread.max is not None and spread.max > cfg.threshold_l2:
        found.append(f"{cfg.l2} L2 max {spread.max:.3g} > {cfg.threshold_l2:g}")
    if found:
        return FOUND, "; ".join(found)
    if rate is None and spread.max is None and not f["unmatched"]:
        return NO_DATA, "the answers carried neither tokens nor numeric outputs to compare"
    return NOT_FOUND, f"{f['compared']} answers within the thresholds"


_SUMMED = ("probes", "failed", "no_baseline", "compared", "tokens", "mismatched_tokens", "unmatched")


def merge_figures(parts: Sequence[dict[str, Any] | None], cfg: Consistency) -> dict[str, Any] | None:
    """One level's figures from several shards' (or worker processes'): counts added, histograms
    merged, judged again; a shard without a baseline makes the merge one without."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    spread = L2Spread()
    for p in present:
        spread.merge(L2Spread.decode(p.get("l2_spread")))
    merged: dict[str, Any] = {k: sum(int(p.get(k, 0)) for p in present) for k in _SUMMED}
    merged["l2_spread"] = spread.encode()
    unstable = [str(p["unstable"]) for p in present if p.get("unstable")]
    merged["unstable"] = unstable[0] if unstable else None
    merged["error"] = next((str(p["error"]) for p in present if p.get("error")), None)
    if len(present) < len(parts):
        merged["missing_shards"] = len(parts) - len(present)
    return judge(merged, cfg)


def consistency_cell(figures: dict[str, Any] | None) -> str:
    """A level's consistency in one cell (CLI table, HTML report): the state, the token
    mismatch rate and the largest L2 distance, where measured."""
    if not figures:
        return "-"
    parts = [str(figures.get("state", "-"))]
    if figures.get("mismatch_rate") is not None:
        parts.append(f"mismatch {figures['mismatch_rate']:.2%}")
    if figures.get("l2_max") is not None:
        parts.append(f"L2 max {figures['l2_max']:.3g}")
    return " ".join(parts)
