"""A point-in-time copy of a server's metrics, from any source, in one shape.

Prometheus text (Triton's and vLLM's /metrics), Triton's statistics extension and PromQL answers all
become a :class:`Snapshot`: metric name -> type and one value per label set. Counters are keyed by
the name the server exposes (``nv_inference_count``, ``vllm:num_preemptions_total``), which is
the name a PromQL user writes; histograms and summaries by their family name. A snapshot that could
not be taken carries the error kind and message and no metrics, so a failed scrape is never read as
"all zero".
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from mcp_bench.observed import COUNTER, GAUGE, HISTOGRAM, SUMMARY, UNKNOWN
from mcp_bench.records import ErrorKind

LabelKey = tuple[tuple[str, str], ...]


def label_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> LabelKey:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


@dataclass(frozen=True, slots=True)
class Distribution:
    """A histogram (cumulative buckets, +Inf last) or a summary (no buckets) at one instant."""

    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...] = ()  # (upper bound "le", cumulative count)


@dataclass(slots=True)
class Family:
    name: str
    type: str
    values: dict[LabelKey, float] = field(default_factory=dict)  # counter, gauge, unknown
    distributions: dict[LabelKey, Distribution] = field(default_factory=dict)  # histogram, summary


@dataclass(slots=True)
class Snapshot:
    source: str
    kind: str  # "prometheus_text", "triton_stats", "promql"
    taken_ns: int  # time.perf_counter_ns(), the clock of the load generator's records
    taken_at: str  # ISO 8601, UTC
    families: dict[str, Family] = field(default_factory=dict)
    error_kind: ErrorKind | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @classmethod
    def now(cls, source: str, kind: str) -> Snapshot:
        return cls(source, kind, time.perf_counter_ns(), datetime.now(UTC).isoformat())

    def failed(self, kind: ErrorKind, message: str) -> Snapshot:
        self.error_kind = kind
        self.error = message
        self.families = {}
        return self


def _exposed_counter_name(family: str, text: str) -> str:
    """The counter's name as the server wrote it: the parser adds ``_total`` to every counter sample,
    but Triton's counters have no such suffix (and PromQL must use the exposed name)."""
    exposed = re.search(rf"^{re.escape(family)}_total[{{\s]", text, re.MULTILINE)
    return f"{family}_total" if exposed else family


def parse_prometheus_text(text: str, snapshot: Snapshot) -> Snapshot:
    """Fill ``snapshot`` from Prometheus text exposition; raises ValueError on text that does not parse."""
    for fam in text_string_to_metric_families(text):
        kind = fam.type if fam.type in (COUNTER, GAUGE, HISTOGRAM, SUMMARY) else UNKNOWN
        if kind in (HISTOGRAM, SUMMARY):
            _add_distribution(snapshot, fam.name, kind, fam.samples)
            continue
        name = _exposed_counter_name(fam.name, text) if kind == COUNTER else fam.name
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue  # creation timestamps of counters, not values
            target = snapshot.families.setdefault(name, Family(name, kind))
            target.values[label_key(s.labels)] = float(s.value)
    return snapshot


def _add_distribution(snapshot: Snapshot, name: str, kind: str, samples: Sequence[Sample]) -> None:
    counts: dict[LabelKey, float] = {}
    sums: dict[LabelKey, float] = {}
    buckets: dict[LabelKey, list[tuple[float, float]]] = {}
    for s in samples:
        key = label_key(s.labels, drop=("le", "quantile"))
        if s.name == f"{name}_count":
            counts[key] = float(s.value)
        elif s.name == f"{name}_sum":
            sums[key] = float(s.value)
        elif s.name == f"{name}_bucket":
            buckets.setdefault(key, []).append((float(s.labels["le"]), float(s.value)))
    family = snapshot.families.setdefault(name, Family(name, kind))
    for key, count in counts.items():
        bounds = tuple(sorted(buckets.get(key, []), key=lambda b: b[0]))
        family.distributions[key] = Distribution(count, sums.get(key, math.nan), bounds)
