"""Builders of result documents for the detector tests, through the real code paths: server
deltas from :func:`mcp_bench.servermetrics.delta` over snapshots, Triton statistics through
Triton's JSON shape and the probe's own delta, breakdowns through the level accumulator."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.plan import RunPlan, Slo
from mcp_bench.records import RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import EngineFingerprint, LevelResult, ResultDocument
from mcp_bench.servermetrics.delta import delta
from mcp_bench.servermetrics.observer import build_timeline
from mcp_bench.servermetrics.probes import TritonStatsProbe
from mcp_bench.servermetrics.snapshot import Family, Snapshot, label_key
from mcp_bench.servermetrics.triton_stats import parse_triton_stats

FIXTURES = Path(__file__).parent / "fixtures"
Series = Mapping[tuple[tuple[str, str], ...], float]


class Docs:
    fixtures = FIXTURES

    @staticmethod
    def plan(**overrides: Any) -> RunPlan:
        data: dict[str, Any] = {
            "url": "http://127.0.0.1:1",
            "backend": "openai",
            "model": "m",
            "levels": {"concurrency": [1, 8]},
            "stage": {"requests": 10},
        }
        data.update(overrides)
        return RunPlan.from_dict(data)

    @staticmethod
    def snapshot(
        families: Mapping[str, tuple[str, Series]], t_ns: int, kind: str = "prometheus_text"
    ) -> Snapshot:
        snap = Snapshot("http://server/metrics", kind, t_ns, datetime.now(UTC).isoformat())
        for name, (typ, values) in families.items():
            snap.families[name] = Family(name, typ, dict(values))
        return snap

    @classmethod
    def prom_delta(
        cls,
        before: Mapping[str, tuple[str, Series]],
        after: Mapping[str, tuple[str, Series]],
        seconds: float = 10.0,
        samples: Sequence[Mapping[str, tuple[str, Series]]] | None = None,
    ) -> dict[str, Any]:
        """A Prometheus endpoint's delta; with ``samples``, a timeline of before, samples, after."""
        t0 = 1_000_000_000
        t1 = t0 + int(seconds * 1e9)
        b, a = cls.snapshot(before, t0), cls.snapshot(after, t1)
        out = delta(b, a)
        if samples is not None:
            points = [before, *samples, after]
            step = (t1 - t0) // (len(points) - 1)
            out["timeline"] = build_timeline(
                t0,
                [
                    (t0 + i * step, {n: (typ, dict(v)) for n, (typ, v) in p.items()})
                    for i, p in enumerate(points)
                ],
            )
        return out

    @staticmethod
    def triton_body(
        requests: int,
        queue_ms: float,
        infer_ms: float,
        executions: int | None = None,
        input_ms: float = 0.0,
        output_ms: float = 0.0,
    ) -> dict[str, Any]:
        """Triton's /v2/models/m/stats body with these cumulative totals (ms per request)."""

        def stage(count: int, ms: float) -> dict[str, int]:
            return {"count": count, "ns": int(count * ms * 1e6)}

        total = queue_ms + input_ms + infer_ms + output_ms
        return {
            "model_stats": [
                {
                    "name": "m",
                    "version": "1",
                    "inference_count": requests,
                    "execution_count": requests if executions is None else executions,
                    "inference_stats": {
                        "success": stage(requests, total),
                        "fail": stage(0, 0),
                        "queue": stage(requests, queue_ms),
                        "compute_input": stage(requests, input_ms),
                        "compute_infer": stage(requests, infer_ms),
                        "compute_output": stage(requests, output_ms),
                    },
                }
            ]
        }

    @classmethod
    def triton_delta(cls, after: dict[str, Any], seconds: float = 10.0) -> dict[str, Any]:
        probe = TritonStatsProbe("http://server", "m")
        before = parse_triton_stats(cls.triton_body(0, 0, 0), cls.snapshot({}, 1_000_000_000, "triton_stats"))
        end = parse_triton_stats(after, cls.snapshot({}, 1_000_000_000 + int(seconds * 1e9), "triton_stats"))
        return probe.delta(before, end)

    @staticmethod
    def level(
        index: int = 0,
        concurrency: int | None = 1,
        rate: float | None = None,
        server_metrics: dict[str, Any] | None = None,
        telemetry: dict[str, Any] | str = "unavailable",
        records: Sequence[RequestRecord] = (),
        plan: RunPlan | None = None,
    ) -> LevelResult:
        slo = plan.slo if plan is not None else Slo()
        acc = LevelAccumulator(slo, rate is not None, 1_000_000)
        acc.offset_ns = time.time_ns()
        for rec in records or [RequestRecord(sent_ns=0, end_ns=1_000_000)]:
            acc.add(rec)
        mode = "open" if rate is not None else "closed"
        meta = LevelMeta(index, mode, concurrency if rate is None else None, rate)
        result = acc.to_result(meta)
        result.server_metrics = server_metrics
        result.telemetry = telemetry
        return result

    @classmethod
    def document(cls, levels: Sequence[LevelResult], plan: RunPlan | None = None) -> ResultDocument:
        now = datetime.now(UTC)
        return ResultDocument(
            started_at=now,
            ended_at=now,
            engine=EngineFingerprint(),
            plan=plan or cls.plan(),
            levels=list(levels),
        )

    @staticmethod
    def records(
        tags: Mapping[str, str], latencies_ms: Sequence[float], start_ns: int = 0
    ) -> list[RequestRecord]:
        out = []
        t = start_ns
        for ms in latencies_ms:
            out.append(RequestRecord(sent_ns=t, end_ns=t + int(ms * 1e6), tags=dict(tags)))
            t += 1_000_000
        return out

    @staticmethod
    def gpu(index: int, sm: float | None = None, **fields: float) -> dict[str, Any]:
        """A GPU's telemetry summary with field means (``sm_util_pct``, ``nvlink_tx_kib_s``, ...)."""
        values = dict(fields)
        if sm is not None:
            values["sm_util_pct"] = sm
        return {
            "index": index,
            "name": "NVIDIA H200",
            "fields": {
                k: {"status": "ok", "mean": v, "p95": v, "peak": v, "min": v} for k, v in values.items()
            },
        }

    @staticmethod
    def telemetry(gpus: Sequence[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"status": "ok", "gpus": list(gpus), **extra}


@pytest.fixture
def docs() -> type[Docs]:
    return Docs


def key(**labels: str) -> tuple[tuple[str, str], ...]:
    return label_key(labels)


@pytest.fixture
def labels() -> Any:
    return key
