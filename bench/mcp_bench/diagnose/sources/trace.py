"""Profiler traces in the Chrome trace event format, as the PyTorch profiler writes them
(``torch.profiler`` ``export_chrome_trace``) and as Nsight Systems reports are commonly converted.

What is read: GPU kernels (category ``kernel``, or ``cuda_kernel``/``gpu_kernel``), memory copies
(``gpu_memcpy``/``memcpy``, or names starting ``Memcpy``), step markers (``ProfilerStep#N`` and
other annotations matching a pattern; on the GPU timeline when the trace has them, else the CPU
annotation with kernels assigned by their launch's ``correlation`` id) and named spans of any
category for per-layer figures. Complete events (``ph: X``) and begin/end pairs (``B``/``E``) are
both understood; times are microseconds, as the format defines them. A trace that is not in this
format raises :class:`TraceFormatError` naming what is wrong.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KERNEL_CATS = frozenset({"kernel", "cuda_kernel", "gpu_kernel", "kernels"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "memcpy", "cuda_memcpy", "gpu_memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime"})
GPU_ANNOTATION_CATS = frozenset({"gpu_user_annotation"})
DEFAULT_STEP_PATTERN = r"^(ProfilerStep#\d+|decode_step\b.*|step[ #_]?\d+)"


class TraceFormatError(ValueError):
    """Not a Chrome trace (or a trace without the events a detector needs)."""


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    cat: str
    start_us: float
    dur_us: float
    track: tuple[str, str]  # (pid, tid): device and stream for GPU events
    correlation: int | None = None

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass
class Trace:
    source: str
    kernels: list[Span] = field(default_factory=list)
    copies: list[Span] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)  # every other named span (CPU ops, annotations)
    runtime: dict[int, Span] = field(default_factory=dict)  # launch calls by correlation id

    def steps(self, pattern: str = DEFAULT_STEP_PATTERN) -> list[tuple[str, list[Span]]]:
        """Kernels grouped by step: GPU step annotations, else CPU ones through the launches'
        correlation ids, else one step holding every kernel."""
        rx = re.compile(pattern)
        marks = [s for s in self.spans if rx.search(s.name)]
        gpu_marks = sorted((s for s in marks if s.cat in GPU_ANNOTATION_CATS), key=lambda s: s.start_us)
        if gpu_marks:
            return [  # a GPU annotation holds the kernels of its own device
                (
                    m.name,
                    [
                        k
                        for k in self.kernels
                        if k.track[0] == m.track[0] and m.start_us <= k.start_us < m.end_us
                    ],
                )
                for m in gpu_marks
            ]
        cpu_marks = sorted(marks, key=lambda s: s.start_us)
        if cpu_marks and self.runtime:
            grouped: dict[str, list[Span]] = defaultdict(list)
            for k in self.kernels:
                launch = self.runtime.get(k.correlation) if k.correlation is not None else None
                if launch is None:
                    continue
                for m in cpu_marks:
                    if m.start_us <= launch.start_us < m.end_us:
                        grouped[m.name].append(k)
                        break
            steps = [(m.name, grouped[m.name]) for m in cpu_marks if grouped.get(m.name)]
            if steps:
                return steps
        return [("whole trace", list(self.kernels))] if self.kernels else []


def _events(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        events = data.get("traceEvents")
        if not isinstance(events, list):
            raise TraceFormatError("a JSON object without a 'traceEvents' list is not a Chrome trace")
        return [e for e in events if isinstance(e, dict)]
    if isinstance(data, list):
        return [e for e in data if isinstance(e, dict)]
    raise TraceFormatError("a Chrome trace is a JSON object with 'traceEvents' or a list of events")


def _correlation(event: dict[str, Any]) -> int | None:
    args = event.get("args")
    if isinstance(args, dict):
        for key in ("correlation", "correlationId", "External id"):
            value = args.get(key)
            if isinstance(value, int):
                return value
    return None


def _span(event: dict[str, Any], start: float, dur: float) -> Span:
    return Span(
        name=str(event.get("name", "")),
        cat=str(event.get("cat", "")),
        start_us=start,
        dur_us=dur,
        track=(str(event.get("pid", "")), str(event.get("tid", ""))),
        correlation=_correlation(event),
    )


def parse_trace(data: Any, source: str = "trace") -> Trace:
    """A :class:`Trace` from parsed Chrome trace JSON."""
    trace = Trace(source)
    open_spans: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    spans: list[Span] = []
    for e in _events(data):
        ph = e.get("ph")
        try:
            if ph == "X":
                spans.append(_span(e, float(e["ts"]), float(e.get("dur", 0.0))))
            elif ph == "B":
                open_spans[(str(e.get("pid", "")), str(e.get("tid", "")), str(e.get("name", "")))].append(e)
            elif ph == "E":
                key = (str(e.get("pid", "")), str(e.get("tid", "")), str(e.get("name", "")))
                stack = open_spans.get(key)
                if not stack:  # an "E" may omit its name: close the innermost open span of the track
                    keys = [k for k in open_spans if k[:2] == key[:2] and open_spans[k]]
                    stack = open_spans[keys[-1]] if keys else None
                if stack:
                    begin = stack.pop()
                    start = float(begin["ts"])
                    spans.append(_span(begin, start, float(e["ts"]) - start))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFormatError(f"event {str(e)[:120]}: {exc!r}") from exc
    for s in spans:
        cat = s.cat.lower()
        if cat in KERNEL_CATS:
            trace.kernels.append(s)
        elif cat in MEMCPY_CATS or s.name.startswith(("Memcpy", "Memset")):
            trace.copies.append(s)
        elif cat in RUNTIME_CATS:
            if s.correlation is not None:
                trace.runtime[s.correlation] = s
        elif s.name:
            trace.spans.append(s)
    trace.kernels.sort(key=lambda s: s.start_us)
    trace.copies.sort(key=lambda s: s.start_us)
    return trace


def load_trace(path: str | Path) -> Trace:
    """Read a trace file (JSON; ``.gz`` is decompressed)."""
    p = Path(path)
    raw = p.read_bytes()
    if p.suffix == ".gz":
        import gzip

        raw = gzip.decompress(raw)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{p}: not JSON: {exc}") from exc
    return parse_trace(data, str(p))


def union_us(spans: list[Span]) -> float:
    """Time covered by at least one span (overlaps counted once)."""
    total = 0.0
    end = None
    start = 0.0
    for s in sorted(spans, key=lambda x: x.start_us):
        if end is None or s.start_us > end:
            if end is not None:
                total += end - start
            start, end = s.start_us, s.end_us
        else:
            end = max(end, s.end_us)
    if end is not None:
        total += end - start
    return total


def intervals(spans: list[Span]) -> list[tuple[float, float]]:
    """The union of the spans as sorted disjoint intervals."""
    out: list[tuple[float, float]] = []
    for s in sorted(spans, key=lambda x: x.start_us):
        if out and s.start_us <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], s.end_us))
        else:
            out.append((s.start_us, s.end_us))
    return out


def overlap_us(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Time two sorted disjoint interval lists share."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
