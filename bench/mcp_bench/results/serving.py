"""The serving GPUs of one level, from whichever source observed them: the DCGM exporter's
per-GPU entries or the node-level NVML samplers (``gpu-sampler:<node>``), both kept in
``level.server_metrics``. One summary for the table rows (CLI, status, report): memory peak
share, mean SM utilisation and mean power over the serving GPUs, which sources gave them, and
why any source gave nothing. A figure no source had stays None (shown ``unavailable``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

SAMPLER_PREFIX = "gpu-sampler:"


@dataclass(frozen=True)
class ServingGpus:
    sources: tuple[str, ...]  # the sources that gave figures
    gpus: int
    memory_peak_pct: float | None
    sm_util_mean_pct: float | None
    power_mean_w: float | None
    unavailable: tuple[str, ...]  # "source: why" for each asked source that gave nothing


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _readings(
    gpus: list[Any], memory_key: str, fields_of: Callable[[Mapping[str, Any]], Any]
) -> tuple[list[float], list[float], list[float]]:
    """Per GPU: the memory peak % under ``memory_key``, and the means of SM utilisation and power
    in the mapping ``fields_of`` finds (the GPU entry itself for DCGM, its ``fields`` for NVML)."""
    mem: list[float] = []
    sm: list[float] = []
    power: list[float] = []
    for gpu in gpus:
        if not isinstance(gpu, Mapping):
            continue
        if (v := _num(gpu.get(memory_key))) is not None:
            mem.append(v)
        fields = fields_of(gpu) or {}
        for name, out in (("sm_util_pct", sm), ("power_w", power)):
            entry = fields.get(name)
            if isinstance(entry, Mapping) and (v := _num(entry.get("mean"))) is not None:
                out.append(v)
    return mem, sm, power


def _from_dcgm(gpus: list[Any]) -> tuple[list[float], list[float], list[float]]:
    return _readings(gpus, "fb_used_peak_pct", lambda gpu: gpu)


def _from_sampler(gpus: list[Any]) -> tuple[list[float], list[float], list[float]]:
    return _readings(gpus, "memory_used_peak_pct", lambda gpu: gpu.get("fields"))


def serving_gpus(server_metrics: Mapping[str, Any] | None) -> ServingGpus | None:
    """The level's serving GPUs, or None where no serving-GPU source was asked for."""
    if not server_metrics:
        return None
    sources: list[str] = []
    missing: list[str] = []
    mem: list[float] = []
    sm: list[float] = []
    power: list[float] = []
    count = 0
    for name, entry in server_metrics.items():
        if not isinstance(entry, Mapping):
            continue
        sampler = name.startswith(SAMPLER_PREFIX)
        if not (sampler or name == "dcgm" or _is_dcgm_source(entry)):
            continue
        gpus = entry.get("gpus") if entry.get("status") == "ok" else None
        if not gpus:
            ok = entry.get("status") == "ok"
            why = entry.get("reason") or ("no GPU in its answer" if ok else entry.get("status"))
            missing.append(f"{name}: {why}")
            continue
        found = _from_sampler(gpus) if sampler else _from_dcgm(gpus)
        sources.append(name)
        count += len(gpus)
        mem += found[0]
        sm += found[1]
        power += found[2]
    if not sources and not missing:
        return None
    return ServingGpus(
        sources=tuple(sources),
        gpus=count,
        memory_peak_pct=max(mem) if mem else None,
        sm_util_mean_pct=_mean(sm),
        power_mean_w=_mean(power),
        unavailable=tuple(missing),
    )


def _is_dcgm_source(entry: Mapping[str, Any]) -> bool:
    metrics = entry.get("metrics")
    return isinstance(metrics, Mapping) and any(str(n).startswith("DCGM_FI_") for n in metrics)


def serving_cell(serving: ServingGpus | None) -> str:
    """The serving GPUs in one table cell: memory peak, mean SM utilisation and power, or
    ``unavailable`` where no source gave a figure; ``-`` where they were not observed."""
    if serving is None:
        return "-"
    if not serving.sources:
        return "unavailable"
    parts = [
        f"{label} {value:.{digits}f}{unit}"
        for label, value, digits, unit in (
            ("mem", serving.memory_peak_pct, 1, "%"),
            ("SM", serving.sm_util_mean_pct, 0, "%"),
            ("", serving.power_mean_w, 0, " W"),
        )
        if value is not None
    ]
    return " ".join(p.strip() for p in parts) or "unavailable"
