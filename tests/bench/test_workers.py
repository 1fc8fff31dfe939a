"""Several client processes per run (``workers``): the load split is exact, the merge is the shards'
merge, and each worker's CPU and lag are reported, against the reference server."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.engines import run_plan_sync
from mcp_bench.engines.runloop import level_metas, level_schedule
from mcp_bench.engines.workers import merge_level, run_level_processes, split_level
from mcp_bench.plan import PlanError, RunPlan, choose_workers
from mcp_bench.results.document import loads_document
from mcp_bench.results.histogram import LatencyHistogram
from mcp_refserver import RunningServer


def _plan(url: str, workers: int, **kw: Any) -> RunPlan:
    data: dict[str, Any] = {"url": url, "workers": workers, "request_timeout_s": 5.0}
    data.update(kw)
    return RunPlan.from_dict(data)


def test_closed_loop_split_divides_concurrency_and_requests() -> None:
    plan = _plan("http://h/x", 3, levels={"concurrency": [7]}, stage={"requests": 100})
    parts = split_level(plan, level_metas(plan)[0])
    assert [p.plan.levels.concurrency for p in parts] == [[3], [2], [2]]
    assert [p.plan.stage.requests for p in parts] == [34, 33, 33]
    assert all(p.plan.workers == 1 for p in parts)
    small = _plan("http://h/x", 4, levels={"concurrency": [2]}, stage={"duration_s": 1})
    assert len(split_level(small, level_metas(small)[0])) == 2  # never a worker with nothing to do


def test_open_loop_split_deals_the_one_process_schedule() -> None:
    plan = _plan(
        "http://h/x",
        3,
        levels={"rate": [500.0], "seed": 7, "ramp_s": 0.2, "max_concurrency": 10},
        stage={"warmup_s": 0.3, "duration_s": 1.0},
    )
    meta = level_metas(plan)[0]
    whole = level_schedule(plan, meta)
    parts = split_level(plan, meta)
    slices = [p.schedule for p in parts]
    assert all(s is not None for s in slices)
    union = sorted(o for s in slices if s is not None for o in s.offsets_ns)
    assert union == list(whole.offsets_ns)
    assert sum(s.warmup_count for s in slices if s is not None) == whole.warmup_count
    assert sum(s.measured_count for s in slices if s is not None) == whole.measured_count
    assert [p.plan.levels.max_concurrency for p in parts] == [4, 4, 4]


def test_auto_workers_follow_the_largest_level_and_the_cores() -> None:
    """512 streams on 16 cores: 4 processes (the setting that measured TTFT within 0.5 ms);
    never more than half the cores, one for small levels and for engines with their own."""
    assert choose_workers({"concurrency": [1, 512]}, cores=16) == 4
    assert choose_workers({"concurrency": [512]}, cores=2) == 1
    assert choose_workers({"concurrency": [64]}, cores=16) == 1
    assert choose_workers({"rate": [100.0, 6000.0]}, cores=16) == 4
    assert choose_workers({"concurrency": [4096]}, cores=8) == 4  # half the cores at most
    assert choose_workers({"concurrency": [512]}, engine="locust", cores=16) == 1
    plan = _plan("http://h/x", "auto", levels={"concurrency": [4]}, stage={"requests": 4})  # type: ignore[arg-type]
    assert plan.workers == 1  # resolved where the plan is read


def test_quick_runs_choose_workers_and_plans_keep_theirs(refserver: RunningServer, tmp_path: Any) -> None:
    out = tmp_path / "r.json"
    args = ["run", "--url", refserver.url + "/delay?ms=1", "--concurrency", "2", "--requests", "20"]
    assert main([*args, "-o", str(out)]) == 0
    doc = loads_document(out.read_text())
    assert doc.plan.workers == choose_workers({"concurrency": [2]})
    with pytest.raises(SystemExit):
        main([*args, "--workers", "many"])


def test_workers_need_the_builtin_engine() -> None:
    with pytest.raises(PlanError, match="builtin engine"):
        _plan("http://h/x", 2, engine="locust", levels={"concurrency": [2]}, stage={"requests": 2})


def test_two_workers_send_what_one_sends_and_report_their_cpu(refserver: RunningServer) -> None:
    kw: dict[str, Any] = {"levels": {"concurrency": [4]}, "stage": {"requests": 60}}
    one = run_plan_sync(_plan(refserver.url + "/delay?ms=5", 1, **kw))
    two = run_plan_sync(_plan(refserver.url + "/delay?ms=5", 2, **kw))
    (a,), (b,) = one.levels, two.levels
    assert a.completed == b.completed == 60 and b.failed == 0
    assert a.workers is None and a.client_bound is None  # one process: no per-worker rows
    assert b.concurrency == 4 and b.shards == 1 and two.shards == 1
    assert b.workers is not None and [w.worker for w in b.workers] == [0, 1]
    assert sum(w.sent for w in b.workers) == 60
    assert all(w.cpu_s > 0 and w.wall_s > 0 and 0 < w.cpu_share < 0.9 for w in b.workers)
    assert b.client_bound is None


def test_open_loop_workers_send_the_schedule_and_merge_exactly(refserver: RunningServer) -> None:
    plan = _plan(
        refserver.url + "/delay?ms=2",
        2,
        levels={"rate": [200.0], "arrival": "poisson", "seed": 3},
        stage={"warmup_s": 0.1, "duration_s": 0.6},
    )
    meta = level_metas(plan)[0]
    docs = run_level_processes(plan, meta)
    level = merge_level(meta, docs)
    assert level.sent == level_schedule(plan, meta).measured_count
    assert level.requested_rate == 200.0 and level.completed == level.sent
    assert level.workers is not None and all(w.lag_p99_ms is not None for w in level.workers)
    # the merged figures are those of every worker's requests together (histograms added)
    for metric in ("e2e", "schedule_lag"):
        parts = [d.levels[0].histogram(metric) for d in docs]
        union = LatencyHistogram()
        for part in parts:
            assert part is not None
            union.merge(part)
        table = level.latency[metric]
        assert table.count == union.count == sum(d.levels[0].latency[metric].count for d in docs)
        assert table.p50_ms == union.percentile_ms(50.0) and table.p99_ms == union.percentile_ms(99.0)
        assert table.max_ms == max(d.levels[0].latency[metric].max_ms or 0.0 for d in docs)


def test_an_impossible_bound_flags_the_level_in_the_result_and_the_table(
    refserver: RunningServer, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"url: {refserver.url}/delay?ms=2\nlevels: {{rate: [100], seed: 1}}\n"
        "stage: {duration_s: 0.5}\nclient_bound: {cpu_share: 0.000001, lag_p99_ms: 0.000001}\n"
    )
    out = tmp_path / "r.json"
    for workers in ("2", "1"):  # one process is flagged as several are
        assert main(["run", "--plan", str(plan), "--workers", workers, "-o", str(out)]) == 0
        (level,) = loads_document(out.read_text()).levels
        assert level.client_bound is not None, workers
        assert any("CPU" in r for r in level.client_bound) and any("lag" in r for r in level.client_bound)
        text = capsys.readouterr().out
        assert "BOUND" in text and "client-bound" in text and "--workers" in text
