"""NVML sampler: per-GPU telemetry from a background thread at a fixed interval (5 ms to 60 s).

Ticks follow an absolute schedule (start + n * interval), so lateness does not accumulate; each
sample records its achieved and its scheduled time, and the thread measures its own CPU time, so the
report can show the sampler's jitter and cost. PCIe and NVLink throughput are read by a second
thread at their own, slower period (``slow_interval_s``, default 1 s) and merged into the next tick's
sample: ``nvmlDeviceGetPcieThroughput`` samples the bus for about 20 ms inside the call, which would
wreck a 5 ms cadence if the main thread made it. Without ``pynvml``, NVML or a GPU the series is
``unavailable`` with the reason, and holds no samples.

Only the standard library is imported at module level (``pynvml`` lazily in :meth:`GpuSampler.start`),
so this module can be loaded on a GPU machine that has nothing else installed.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType, TracebackType
from typing import Any

from mcp_bench.telemetry.nvml_readers import (
    Reader,
    UnsupportedError,
    build_readers,
    error_name,
    is_unsupported,
    memory_query,
)
from mcp_bench.telemetry.series import DEFAULT_CAPACITY, FIELDS, GpuInfo, TelemetrySeries
from mcp_bench.telemetry.stats import summarise

MIN_INTERVAL_S = 0.005
MAX_INTERVAL_S = 60.0
DEFAULT_INTERVAL_S = 0.1
DEFAULT_SLOW_INTERVAL_S = 1.0


class _Ticker:
    """An absolute schedule: tick n is due at start + n * interval; whole slots that pass are skipped."""

    def __init__(self, interval_s: float, stop: threading.Event) -> None:
        self.interval_ns = round(interval_s * 1e9)
        self.stop = stop
        self.start_ns = self.due_ns = time.perf_counter_ns()
        self.missed = 0

    def wait(self) -> int | None:
        """Block until the next tick is due; its start instant, or None once stop is set."""
        while True:
            now = time.perf_counter_ns()
            if now >= self.due_ns:
                return None if self.stop.is_set() else now
            if self.stop.wait((self.due_ns - now) / 1e9):
                return None

    def advance(self, done_ns: int) -> None:
        self.due_ns += self.interval_ns
        while self.due_ns + self.interval_ns <= done_ns:  # a whole slot passed during the reads
            self.due_ns += self.interval_ns
            self.missed += 1


class TelemetryConfigError(ValueError):
    """A sampler setting outside what the sampler can honour."""


def validate_interval(interval_s: float, name: str = "interval_s") -> float:
    if not isinstance(interval_s, int | float) or math.isnan(interval_s):
        raise TelemetryConfigError(f"{name} must be a number of seconds, got {interval_s!r}")
    if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
        raise TelemetryConfigError(
            f"{name} must be between {MIN_INTERVAL_S} s (5 ms) and {MAX_INTERVAL_S} s, got {interval_s} s"
        )
    return float(interval_s)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class GpuSampler:
    """Samples every GPU (or ``gpu_indices``) until :meth:`stop`; usable as a context manager.

    >>> sampler = GpuSampler(0.1).start()
    >>> ...  # run a level, note perf_counter_ns() at its start and end
    >>> sampler.summarise(level_start_ns, level_end_ns)   # while running, or after stop()
    >>> series = sampler.stop()
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        capacity: int = DEFAULT_CAPACITY,
        slow_interval_s: float = DEFAULT_SLOW_INTERVAL_S,
        gpu_indices: Sequence[int] | None = None,
    ) -> None:
        self.interval_s = validate_interval(interval_s)
        self.slow_interval_s = validate_interval(slow_interval_s, "slow_interval_s")
        if self.slow_interval_s < self.interval_s:
            raise TelemetryConfigError(
                f"slow_interval_s ({self.slow_interval_s} s) must not be shorter than "
                f"interval_s ({self.interval_s} s)"
            )
        if capacity < 2:
            raise TelemetryConfigError(f"capacity must be at least 2 samples, got {capacity}")
        self.capacity = capacity
        self.gpu_indices = None if gpu_indices is None else list(gpu_indices)
        self._nvml: ModuleType | None = None
        self._devices: list[tuple[Any, list[Reader]]] = []
        self._series: TelemetrySeries | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._mailbox: list[float] | None = None  # latest slow readings, taken by the next fast tick
        self._mailbox_lock = threading.Lock()

    @property
    def series(self) -> TelemetrySeries:
        if self._series is None:
            raise RuntimeError("the sampler has not been started")
        return self._series

    def start(self) -> GpuSampler:
        if self._series is not None:
            raise RuntimeError("a GpuSampler can be started once")
        self._series = self._open()
        if self._series.available:
            self._series.stats.slow_interval_s = self.slow_interval_s
            loops: list[tuple[str, Callable[[], None]]] = [("nvml-sampler", self._run_fast)]
            if any(r.slow for _, readers in self._devices for r in readers):
                loops.append(("nvml-sampler-slow", self._run_slow))
            for name, target in loops:
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self) -> TelemetrySeries:
        series = self.series
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10.0 + self.slow_interval_s)
            if thread.is_alive():
                series.errors[f"{thread.name}:ThreadDidNotStop"] += 1
        self._threads = []
        self._stop_nvml(series)
        return series

    def summarise(self, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
        return summarise(self.series, start_ns, end_ns)

    def __enter__(self) -> GpuSampler:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _stop_nvml(self, series: TelemetrySeries | None = None) -> None:
        if self._nvml is None:
            return
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError as exc:
            if series is not None:
                series.errors[f"shutdown:{error_name(exc)}"] += 1
        self._nvml = None

    def _open(self) -> TelemetrySeries:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError as exc:
            return TelemetrySeries.unavailable(
                f"nvidia-ml-py (module pynvml) is not installed: {exc}", self.interval_s
            )
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            return TelemetrySeries.unavailable(f"NVML could not be initialised: {exc}", self.interval_s)
        self._nvml = nvml
        try:
            return self._open_devices(nvml)
        except nvml.NVMLError as exc:
            self._stop_nvml()
            return TelemetrySeries.unavailable(f"NVML could not list the GPUs: {exc}", self.interval_s)
        except TelemetryConfigError:
            self._stop_nvml()
            raise

    def _open_devices(self, nvml: ModuleType) -> TelemetrySeries:
        count = int(nvml.nvmlDeviceGetCount())
        indices = list(range(count)) if self.gpu_indices is None else self.gpu_indices
        if not indices:
            self._stop_nvml()
            return TelemetrySeries.unavailable("NVML reports no GPU on this machine", self.interval_s)
        wrong = [i for i in indices if not 0 <= i < count]
        if wrong:
            raise TelemetryConfigError(f"gpu_indices {wrong} out of range: NVML reports {count} GPU(s)")
        gpus: list[GpuInfo] = []
        unsupported: list[tuple[int, str, str]] = []
        for pos, index in enumerate(indices):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                GpuInfo(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    memory_total_bytes=int(memory_query(nvml, handle)(handle).total),
                )
            )
            readers, missing = build_readers(nvml, handle)
            for reader in readers:
                reader.offsets = tuple(pos * len(FIELDS) + FIELDS.index(f) for f in reader.fields)
            self._devices.append((handle, readers))
            unsupported += [(index, name, why) for name, why in missing.items()]
        series = TelemetrySeries(gpus, self.interval_s, capacity=self.capacity)
        for index, name, why in unsupported:
            series.mark_unsupported(index, name, why)
        return series

    def _read(self, series: TelemetrySeries, row: list[float], slow: bool) -> None:
        """Run the fast (or the slow) readers of every GPU into ``row``; failures counted by kind."""
        nvml = self._nvml
        assert nvml is not None
        for (handle, readers), gpu in zip(self._devices, series.gpus, strict=True):
            for reader in list(readers):
                if reader.slow != slow:
                    continue
                try:
                    values = reader.fn(handle)
                except Exception as exc:  # counted by kind below; one bad query must not stop sampling
                    if isinstance(exc, UnsupportedError) or is_unsupported(nvml, exc):
                        readers.remove(reader)
                        for name in reader.fields:
                            series.mark_unsupported(gpu.index, name, f"NVML: {exc}")
                    else:
                        series.errors[f"{reader.fields[0]}:{error_name(exc)}"] += 1
                    continue
                for offset, value in zip(reader.offsets, values, strict=True):
                    row[offset] = value

    def _take_mailbox(self, row: list[float]) -> None:
        with self._mailbox_lock:
            slow, self._mailbox = self._mailbox, None
        if slow is not None:
            for i, value in enumerate(slow):
                if not math.isnan(value):
                    row[i] = value

    def _run_fast(self) -> None:
        series = self.series
        stats = series.stats
        width = len(series.gpus) * len(FIELDS)
        ticker = _Ticker(self.interval_s, self._stop)
        cpu0 = time.thread_time_ns()
        while (now := ticker.wait()) is not None:
            row = [math.nan] * width
            self._read(series, row, slow=False)
            self._take_mailbox(row)
            done = time.perf_counter_ns()
            series.append(now, ticker.due_ns, done - now, row)
            ticker.advance(done)
            stats.ticks += 1
            stats.missed_ticks = ticker.missed
            stats.cpu_ns = time.thread_time_ns() - cpu0
            stats.wall_ns = done - ticker.start_ns
        stats.cpu_ns = time.thread_time_ns() - cpu0
        stats.wall_ns = time.perf_counter_ns() - ticker.start_ns

    def _run_slow(self) -> None:
        series = self.series
        stats = series.stats
        width = len(series.gpus) * len(FIELDS)
        ticker = _Ticker(self.slow_interval_s, self._stop)
        cpu0 = time.thread_time_ns()
        while (now := ticker.wait()) is not None:
            row = [math.nan] * width
            self._read(series, row, slow=True)
            with self._mailbox_lock:
                self._mailbox = row
            done = time.perf_counter_ns()
            ticker.advance(done)
            stats.slow_ticks += 1
            stats.slow_read_ns_max = max(stats.slow_read_ns_max, done - now)
            stats.slow_cpu_ns = time.thread_time_ns() - cpu0
        stats.slow_cpu_ns = time.thread_time_ns() - cpu0
