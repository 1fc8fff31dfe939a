"""NVML sampler: per-GPU telemetry from a background thread at a fixed interval (5 ms to 60 s).

Ticks follow an absolute schedule (start + n * interval), so lateness does not accumulate; each
sample records its achieved and its scheduled time, and the thread measures its own CPU time, so the
report can show the sampler's jitter and cost. PCIe and NVLink throughput are read only every k-th
tick (``slow_interval_s``): ``nvmlDeviceGetPcieThroughput`` samples the bus for about 20 ms inside
the call, which would wreck a 5 ms cadence. Without ``pynvml``, NVML or a GPU the series is
``unavailable`` with the reason, and holds no samples.

Only the standard library is imported at module level (``pynvml`` lazily in :meth:`GpuSampler.start`),
so this module can be loaded on a GPU machine that has nothing else installed.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from collections.abc import Sequence
from types import ModuleType, TracebackType
from typing import Any

from mcp_bench.telemetry.nvml_readers import (
    Reader,
    UnsupportedError,
    build_readers,
    error_name,
    is_unsupported,
)
from mcp_bench.telemetry.series import DEFAULT_CAPACITY, FIELDS, GpuInfo, TelemetrySeries
from mcp_bench.telemetry.stats import summarise

MIN_INTERVAL_S = 0.005
MAX_INTERVAL_S = 60.0
DEFAULT_INTERVAL_S = 0.1
DEFAULT_SLOW_INTERVAL_S = 1.0


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
        slow = validate_interval(slow_interval_s, "slow_interval_s")
        if slow < self.interval_s:
            raise TelemetryConfigError(
                f"slow_interval_s ({slow} s) must not be shorter than interval_s ({self.interval_s} s)"
            )
        if capacity < 2:
            raise TelemetryConfigError(f"capacity must be at least 2 samples, got {capacity}")
        self.slow_every = max(1, round(slow / self.interval_s))
        self.capacity = capacity
        self.gpu_indices = None if gpu_indices is None else list(gpu_indices)
        self._nvml: ModuleType | None = None
        self._devices: list[tuple[Any, list[Reader]]] = []
        self._series: TelemetrySeries | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

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
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> TelemetrySeries:
        series = self.series
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0 + self.interval_s)
            if self._thread.is_alive():
                series.errors["sampler:ThreadDidNotStop"] += 1
            self._thread = None
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as exc:
                series.errors[f"shutdown:{error_name(exc)}"] += 1
            self._nvml = None
        return series

    def summarise(self, start_ns: int | None = None, end_ns: int | None = None) -> dict[str, Any]:
        return summarise(self.series, start_ns, end_ns)

    def __enter__(self) -> GpuSampler:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

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
            self.stop_nvml()
            return TelemetrySeries.unavailable(f"NVML could not list the GPUs: {exc}", self.interval_s)

    def stop_nvml(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    def _open_devices(self, nvml: ModuleType) -> TelemetrySeries:
        count = int(nvml.nvmlDeviceGetCount())
        indices = list(range(count)) if self.gpu_indices is None else self.gpu_indices
        if not indices:
            self.stop_nvml()
            return TelemetrySeries.unavailable("NVML reports no GPU on this machine", self.interval_s)
        wrong = [i for i in indices if not 0 <= i < count]
        if wrong:
            self.stop_nvml()
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
                    memory_total_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                )
            )
            readers, missing = build_readers(nvml, handle)
            for reader in readers:
                reader.offsets = tuple(pos * len(FIELDS) + FIELDS.index(f) for f in reader.fields)
            self._devices.append((handle, readers))
            unsupported += [(index, name, why) for name, why in missing.items()]
        series = TelemetrySeries(gpus, self.interval_s, capacity=self.capacity)
        series.stats.slow_every = self.slow_every
        for index, name, why in unsupported:
            series.mark_unsupported(index, name, why)
        return series

    def _read_tick(self, series: TelemetrySeries, row: list[float], slow: bool) -> None:
        nvml = self._nvml
        assert nvml is not None
        for (handle, readers), gpu in zip(self._devices, series.gpus, strict=True):
            for reader in list(readers):
                if reader.slow and not slow:
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

    def _run(self) -> None:
        series = self.series
        stats = series.stats
        width = len(series.gpus) * len(FIELDS)
        interval_ns = round(self.interval_s * 1e9)
        cpu0 = time.thread_time_ns()
        wall0 = next_ns = time.perf_counter_ns()
        tick = 0
        while True:
            now = time.perf_counter_ns()
            if now < next_ns:
                if self._stop.wait((next_ns - now) / 1e9):
                    break
                continue
            if self._stop.is_set():
                break
            row = [math.nan] * width
            self._read_tick(series, row, slow=tick % self.slow_every == 0)
            done = time.perf_counter_ns()
            series.append(now, next_ns, done - now, row)
            tick += 1
            next_ns += interval_ns
            while next_ns + interval_ns <= done:  # a whole tick slot passed during the reads
                next_ns += interval_ns
                stats.missed_ticks += 1
            stats.ticks = tick
            stats.cpu_ns = time.thread_time_ns() - cpu0
            stats.wall_ns = done - wall0
        stats.cpu_ns = time.thread_time_ns() - cpu0
        stats.wall_ns = time.perf_counter_ns() - wall0
