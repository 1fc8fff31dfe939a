"""A mergeable histogram of L2 distances: shards' and workers' figures add exactly, so a merged
level's P99 is the P99 of every comparison, not an average of P99s.

Distances span many decades (0 at rest, 1e-7 for float noise, 1 for a different answer), so
buckets are logarithmic, 1 % wide; exact zeros are counted on their own. A quantile is reported
as its bucket's upper edge (never below the true value), capped at the exact maximum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

RATIO = 1.01
_LOG_RATIO = math.log(RATIO)


@dataclass
class L2Spread:
    zero: int = 0
    buckets: dict[int, int] = field(default_factory=dict)
    max: float | None = None

    @property
    def count(self) -> int:
        return self.zero + sum(self.buckets.values())

    def add(self, value: float) -> None:
        if value < 0 or math.isnan(value):
            raise ValueError(f"an L2 distance is >= 0, got {value}")
        self.max = value if self.max is None else max(self.max, value)
        if value == 0:
            self.zero += 1
            return
        index = math.floor(math.log(value) / _LOG_RATIO)
        self.buckets[index] = self.buckets.get(index, 0) + 1

    def merge(self, other: L2Spread) -> None:
        self.zero += other.zero
        for index, n in other.buckets.items():
            self.buckets[index] = self.buckets.get(index, 0) + n
        if other.max is not None:
            self.max = other.max if self.max is None else max(self.max, other.max)

    def quantile(self, q: float) -> float | None:
        """Nearest-rank quantile (0 < q <= 1); None when empty."""
        total = self.count
        if not total or self.max is None:
            return None
        rank = max(1, math.ceil(q * total))
        if rank <= self.zero:
            return 0.0
        seen = self.zero
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return min(RATIO ** (index + 1), self.max)
        return self.max

    def encode(self) -> dict[str, Any]:
        return {
            "zero": self.zero,
            "buckets": {str(k): v for k, v in sorted(self.buckets.items())},
            "max": self.max,
        }

    @classmethod
    def decode(cls, data: dict[str, Any] | None) -> L2Spread:
        if not data:
            return cls()
        return cls(
            zero=int(data.get("zero", 0)),
            buckets={int(k): int(v) for k, v in (data.get("buckets") or {}).items()},
            max=None if data.get("max") is None else float(data["max"]),
        )
