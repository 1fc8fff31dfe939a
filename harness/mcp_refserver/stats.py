"""Cumulative per-model counters, shown both as Triton's statistics extension and as /metrics.

One object feeds both views, so a scraper that reads ``/v2/models/{m}/stats`` and the
``nv_inference_*`` metrics sees the same numbers (as it would on Triton).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Cumulative:
    count: int = 0
    ns: int = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += ns

    def as_json(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(slots=True)
class ServerStats:
    """Triton's cumulative request statistics for the one model the server hosts.

    ``success``/``fail`` hold the whole request duration (arrival to end), ``queue`` the wait
    before service (a slot, or a batch to fill), ``compute_infer`` the time in service less the
    input decoding and output encoding, which ``compute_input`` and ``compute_output`` hold (zero
    unless a codec knob is set). Every request is one execution unless the batcher runs several
    requests in one (``execution_count`` counts the executions).
    """

    success: Cumulative
    fail: Cumulative
    queue: Cumulative
    compute_input: Cumulative
    compute_infer: Cumulative
    compute_output: Cumulative
    execution_count: int = 0
    last_inference_ms: int = 0

    def __init__(self) -> None:
        self.success, self.fail = Cumulative(), Cumulative()
        self.queue, self.compute_infer = Cumulative(), Cumulative()
        self.compute_input, self.compute_output = Cumulative(), Cumulative()
        self.execution_count = 0
        self.last_inference_ms = 0

    @property
    def inference_count(self) -> int:
        return self.success.count

    def record(
        self,
        *,
        queue_ns: int,
        compute_ns: int,
        total_ns: int,
        ok: bool,
        input_ns: int = 0,
        output_ns: int = 0,
        executions: int = 1,
    ) -> None:
        if ok:
            self.success.add(total_ns)
            self.queue.add(queue_ns)
            self.compute_infer.add(compute_ns - input_ns - output_ns)
            if input_ns or output_ns:  # not modelled unless a codec knob is set: zero counts, as before
                self.compute_input.add(input_ns)
                self.compute_output.add(output_ns)
            self.execution_count += executions
        else:
            self.fail.add(total_ns)
        self.last_inference_ms = time.time_ns() // 1_000_000

    def record_rejected(self) -> None:
        """A request refused before service (injected error): a failure of zero duration."""
        self.fail.add(0)
        self.last_inference_ms = time.time_ns() // 1_000_000

    def triton_json(self, model: str, version: str) -> dict[str, Any]:
        """The body of ``GET /v2/models/{model}/stats`` in Triton's shape."""
        zero = {"count": 0, "ns": 0}
        return {
            "model_stats": [
                {
                    "name": model,
                    "version": version,
                    "last_inference": self.last_inference_ms,
                    "inference_count": self.inference_count,
                    "execution_count": self.execution_count,
                    "inference_stats": {
                        "success": self.success.as_json(),
                        "fail": self.fail.as_json(),
                        "queue": self.queue.as_json(),
                        "compute_input": self.compute_input.as_json(),
                        "compute_infer": self.compute_infer.as_json(),
                        "compute_output": self.compute_output.as_json(),
                        "cache_hit": dict(zero),
                        "cache_miss": dict(zero),
                    },
                    "batch_stats": [],
                    "memory_usage": [],
                }
            ]
        }
