"""One reader per NVML query, each filling one or more telemetry fields of one GPU.

A query NVML does not support on a device (NOT_SUPPORTED, FUNCTION_NOT_FOUND) marks its fields
``unsupported`` and is never called again; any other NVML error is counted by kind and leaves NaN for
that tick. ``pynvml`` is passed in, never imported here, so importing this module needs no NVML.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

ReadFn = Callable[[Any], tuple[float, ...]]


class UnsupportedError(Exception):
    """A query this device cannot answer; its fields become ``unsupported``."""


@dataclass(slots=True)
class Reader:
    """Reads ``fields`` of one GPU with ``fn(handle)``; ``slow`` readers run every k-th tick only."""

    fields: tuple[str, ...]
    fn: ReadFn
    slow: bool = False
    offsets: tuple[int, ...] = field(default=())  # positions of ``fields`` in the sample row


def is_unsupported(nvml: ModuleType, exc: BaseException) -> bool:
    codes = {nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND}
    return isinstance(exc, nvml.NVMLError) and getattr(exc, "value", None) in codes


def error_name(exc: BaseException) -> str:
    return type(exc).__name__


def memory_query(nvml: ModuleType, handle: Any) -> Callable[[Any], Any]:
    """The memory query to use: v2 where the driver has it, else v1.

    v1's ``used`` counts the memory the driver reserves for itself (about 615 MiB on an H200 with
    driver 580); v2 reports that apart, and its ``used`` is what ``nvidia-smi`` shows.
    """
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except nvml.NVMLError:
            pass  # old driver without nvmlDeviceGetMemoryInfo_v2
        else:
            return lambda h: nvml.nvmlDeviceGetMemoryInfo(h, version=version)
    return lambda h: nvml.nvmlDeviceGetMemoryInfo(h)


def _nvlink_links(nvml: ModuleType, handle: Any) -> list[int]:
    """Active NVLink links of a device; an empty list where NVML reports none or no NVLink."""
    links: list[int] = []
    for link in range(int(nvml.NVML_NVLINK_MAX_LINKS)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED:
                links.append(link)
        except nvml.NVMLError:
            # NVML answers NOT_SUPPORTED or INVALID_ARGUMENT past the last link the device has.
            continue
    return links


class _NvLinkRate:
    """NVLink data counters (KiB, cumulative per link) turned into KiB/s between two reads."""

    def __init__(self, nvml: ModuleType, links: list[int]) -> None:
        self._nvml = nvml
        tx = nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
        rx = nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
        self._ids = [(tx, link) for link in links] + [(rx, link) for link in links]
        self._half = len(links)
        self._last: tuple[int, float, float] | None = None

    def __call__(self, handle: Any) -> tuple[float, float]:
        values = self._nvml.nvmlDeviceGetFieldValues(handle, self._ids)
        now = time.perf_counter_ns()
        totals = [0.0, 0.0]
        for i, v in enumerate(values):
            if v.nvmlReturn != self._nvml.NVML_SUCCESS:
                raise UnsupportedError(f"NVLink throughput field answered NVML return code {v.nvmlReturn}")
            totals[0 if i < self._half else 1] += float(v.value.ullVal)
        last, self._last = self._last, (now, totals[0], totals[1])
        if last is None or now <= last[0]:
            return (float("nan"), float("nan"))
        dt = (now - last[0]) / 1e9
        return ((totals[0] - last[1]) / dt, (totals[1] - last[2]) / dt)


def build_readers(nvml: ModuleType, handle: Any) -> tuple[list[Reader], dict[str, str]]:
    """Readers for one device, and the fields known up front to be unsupported (with the reason)."""
    memory_info = memory_query(nvml, handle)

    def memory(h: Any) -> tuple[float, ...]:
        return (float(memory_info(h).used),)

    def utilisation(h: Any) -> tuple[float, ...]:
        u = nvml.nvmlDeviceGetUtilizationRates(h)
        return (float(u.gpu), float(u.memory))

    def power(h: Any) -> tuple[float, ...]:
        return (nvml.nvmlDeviceGetPowerUsage(h) / 1000.0,)

    def sm_clock(h: Any) -> tuple[float, ...]:
        return (float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),)

    def pcie(h: Any) -> tuple[float, ...]:
        tx = nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_TX_BYTES)
        rx = nvml.nvmlDeviceGetPcieThroughput(h, nvml.NVML_PCIE_UTIL_RX_BYTES)
        return (float(tx), float(rx))

    readers = [
        Reader(("mem_used_bytes",), memory),
        Reader(("sm_util_pct", "mem_util_pct"), utilisation),
        Reader(("power_w",), power),
        Reader(("sm_clock_mhz",), sm_clock),
        Reader(("pcie_tx_kb_s", "pcie_rx_kb_s"), pcie, slow=True),
    ]
    unsupported: dict[str, str] = {}
    links = _nvlink_links(nvml, handle)
    if links:
        readers.append(Reader(("nvlink_tx_kib_s", "nvlink_rx_kib_s"), _NvLinkRate(nvml, links), slow=True))
    else:
        for name in ("nvlink_tx_kib_s", "nvlink_rx_kib_s"):
            unsupported[name] = "no active NVLink link on this device"
    return readers, unsupported
