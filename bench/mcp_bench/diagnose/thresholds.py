"""Threshold overrides: ``3.queue_share=0.5`` or ``false-wait.queue_share=0.5`` (trap number or key)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class ThresholdError(ValueError):
    """An override that names no detector or threshold, or is not a number."""


Overrides = dict[int, dict[str, float]]


def parse_overrides(texts: Iterable[str], known: Mapping[int, tuple[str, Mapping[str, float]]]) -> Overrides:
    """``known``: trap -> (key, default thresholds). Raises ThresholdError naming what is wrong."""
    by_key = {key: trap for trap, (key, _) in known.items()}
    out: Overrides = {}
    for text in texts:
        name, sep, value = text.partition("=")
        which, dot, threshold = name.strip().partition(".")
        if not sep or not dot:
            raise ThresholdError(f"threshold {text!r}: expected TRAP.NAME=VALUE, e.g. 3.queue_share=0.5")
        trap = int(which) if which.isdigit() else by_key.get(which)
        if trap is None or trap not in known:
            raise ThresholdError(
                f"threshold {text!r}: no detector {which!r} (traps 0-12 or {sorted(by_key)})"
            )
        defaults = known[trap][1]
        if threshold not in defaults:
            raise ThresholdError(f"threshold {text!r}: trap {trap} has {', '.join(sorted(defaults))}")
        try:
            number = float(value)
        except ValueError:
            raise ThresholdError(f"threshold {text!r}: {value!r} is not a number") from None
        out.setdefault(trap, {})[threshold] = number
    return out
