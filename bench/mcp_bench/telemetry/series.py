"""GPU telemetry samples kept in bounded memory.

Samples live in fixed-size ring buffers (``array`` columns, 8 bytes a value), so a long run at 5 ms
cannot grow without bound: the oldest samples are overwritten and every window taken afterwards says
whether it is complete. This module is standard library only, so the sampler can be imported on a GPU
machine that has nothing but ``pynvml`` installed.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from mcp_bench.observed import STATUS_OK, STATUS_UNAVAILABLE

# Per-GPU fields, in storage order. Units are in the names; PCIe and NVLink keep NVML's own units.
FIELDS: tuple[str, ...] = (
    "mem_used_bytes",
    "sm_util_pct",
    "mem_util_pct",
    "power_w",
    "sm_clock_mhz",
    "pcie_tx_kb_s",
    "pcie_rx_kb_s",
    "nvlink_tx_kib_s",
    "nvlink_rx_kib_s",
)

DEFAULT_CAPACITY = 65_536  # samples: 1.8 h at 100 ms, 5.5 min at 5 ms


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """Static facts about one GPU, read once when sampling starts."""

    index: int
    name: str
    uuid: str
    memory_total_bytes: int


@dataclass(slots=True)
class SamplerStats:
    """What sampling itself cost, so the sampler can be shown not to disturb the run."""

    cpu_ns: int = 0  # CPU time of the sampling thread (time.thread_time_ns)
    slow_cpu_ns: int = 0  # CPU time of the thread that reads PCIe and NVLink
    wall_ns: int = 0  # wall time the sampling thread ran
    ticks: int = 0
    missed_ticks: int = 0  # ticks skipped because a read overran the next tick
    slow_interval_s: float = 0.0  # PCIe/NVLink read period (own thread)
    slow_ticks: int = 0
    slow_read_ns_max: int = 0  # longest PCIe/NVLink read of one tick

    @property
    def cpu_pct_of_one_core(self) -> float | None:
        """Both sampling threads together, as a share of one core over the sampling time."""
        return None if self.wall_ns <= 0 else 100.0 * (self.cpu_ns + self.slow_cpu_ns) / self.wall_ns

    def to_dict(self) -> dict[str, object]:
        return {
            "cpu_s": self.cpu_ns / 1e9,
            "slow_cpu_s": self.slow_cpu_ns / 1e9,
            "wall_s": self.wall_ns / 1e9,
            "cpu_pct_of_one_core": self.cpu_pct_of_one_core,
            "ticks": self.ticks,
            "missed_ticks": self.missed_ticks,
            "slow_interval_s": self.slow_interval_s,
            "slow_ticks": self.slow_ticks,
            "slow_read_ms_max": self.slow_read_ns_max / 1e6,
        }


@dataclass(slots=True)
class SampleWindow:
    """A copy of the samples taken in [start_ns, end_ns]; plain lists, safe to use off the sampler thread.

    ``values[gpu_position][field]`` holds one float per sample; NaN means "not read at that tick"
    (a slow field between its reads, or a failed read), never zero.
    """

    interval_s: float
    gpus: list[GpuInfo]
    t_ns: list[int]
    scheduled_ns: list[int]
    read_ns: list[int]
    values: list[dict[str, list[float]]]
    unsupported: dict[tuple[int, str], str] = field(default_factory=dict)  # (gpu index, field) -> reason
    complete: bool = True  # False when samples of the window were already overwritten
    start_ns: int | None = None
    end_ns: int | None = None


class TelemetrySeries:
    """Telemetry of one sampling run: GPU facts, a ring of samples, field support and error counts.

    Status is ``unavailable`` (with a reason) when NVML or a GPU is missing; such a series holds no
    samples, so nothing downstream can mistake it for an idle GPU.
    """

    def __init__(
        self,
        gpus: Sequence[GpuInfo],
        interval_s: float,
        capacity: int = DEFAULT_CAPACITY,
        fields: Sequence[str] = FIELDS,
    ) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2 samples, got {capacity}")
        self.status = STATUS_OK
        self.reason = ""
        self.gpus = list(gpus)
        self.fields = tuple(fields)
        self.interval_s = interval_s
        self.capacity = capacity
        self.unsupported: dict[tuple[int, str], str] = {}
        self.errors: Counter[str] = Counter()  # "field:ErrorName" -> count
        self.stats = SamplerStats()
        self._width = len(self.gpus) * len(self.fields)
        self._t = array("q", bytes(8 * capacity))
        self._sched = array("q", bytes(8 * capacity))
        self._read = array("q", bytes(8 * capacity))
        self._v = array("d", [math.nan]) * (capacity * self._width)
        self._n = 0  # samples ever appended
        self._lock = threading.Lock()

    @classmethod
    def unavailable(cls, reason: str, interval_s: float = 0.0) -> TelemetrySeries:
        series = cls([], interval_s, capacity=2)
        series.status = STATUS_UNAVAILABLE
        series.reason = reason
        return series

    @property
    def available(self) -> bool:
        return self.status == STATUS_OK

    def __len__(self) -> int:
        return min(self._n, self.capacity)

    @property
    def evicted(self) -> int:
        """Samples overwritten by newer ones (the ring is full)."""
        return max(0, self._n - self.capacity)

    def mark_unsupported(self, gpu_index: int, name: str, reason: str) -> None:
        self.unsupported[(gpu_index, name)] = reason

    def append(self, t_ns: int, scheduled_ns: int, read_ns: int, values: Sequence[float]) -> None:
        """Store one tick; ``values`` is GPU-major: all fields of GPU 0, then GPU 1, ..."""
        if len(values) != self._width:
            raise ValueError(f"expected {self._width} values, got {len(values)}")
        with self._lock:
            slot = self._n % self.capacity
            self._t[slot] = t_ns
            self._sched[slot] = scheduled_ns
            self._read[slot] = read_ns
            base = slot * self._width
            self._v[base : base + self._width] = array("d", values)
            self._n += 1

    def window(self, start_ns: int | None = None, end_ns: int | None = None) -> SampleWindow:
        """Copy out the samples whose timestamp lies in [start_ns, end_ns] (either bound optional)."""
        with self._lock:
            kept = min(self._n, self.capacity)
            first = self._n - kept
            slots = [(first + i) % self.capacity for i in range(kept)]
            chosen = [
                s
                for s in slots
                if (start_ns is None or self._t[s] >= start_ns) and (end_ns is None or self._t[s] <= end_ns)
            ]
            oldest = self._t[slots[0]] if slots else None
            complete = self.evicted == 0 or (
                start_ns is not None and oldest is not None and oldest - start_ns < self.interval_s * 1e9
            )
            nf = len(self.fields)
            values: list[dict[str, list[float]]] = []
            for g in range(len(self.gpus)):
                per: dict[str, list[float]] = {}
                for f, name in enumerate(self.fields):
                    off = g * nf + f
                    per[name] = [self._v[s * self._width + off] for s in chosen]
                values.append(per)
            return SampleWindow(
                interval_s=self.interval_s,
                gpus=list(self.gpus),
                t_ns=[self._t[s] for s in chosen],
                scheduled_ns=[self._sched[s] for s in chosen],
                read_ns=[self._read[s] for s in chosen],
                values=values,
                unsupported=dict(self.unsupported),
                complete=complete,
                start_ns=start_ns,
                end_ns=end_ns,
            )
