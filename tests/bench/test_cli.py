"""The mcp-bench command line, in process, against the loopback server."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mcp_bench.cli import main
from mcp_bench.cli.runflags import parse_duration_s, parse_latency_sla
from mcp_bench.results import loads_document


def test_duration_and_sla_parsing() -> None:
    assert parse_duration_s("120ms") == pytest.approx(0.12)
    assert parse_duration_s("2m") == 120.0
    assert parse_duration_s("5") == 5.0
    assert parse_latency_sla("120ms") == ("latency_p99_ms", pytest.approx(120.0))
    assert parse_latency_sla("p95:0.5s") == ("latency_p95_ms", pytest.approx(500.0))


def test_run_writes_json_and_csv_and_passes(loopback_http, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out, table = tmp_path / "r.json", tmp_path / "r.csv"
    code = main(
        [
            "run",
            "--url",
            loopback_http.url + "/sleep/5",
            "--concurrency",
            "1,2",
            "--requests",
            "20",
            "--latency-sla",
            "2s",
            "--throughput-target",
            "1",
            "--output",
            str(out),
            "--csv",
            str(table),
        ]
    )
    assert code == 0
    doc = loads_document(out.read_text())
    assert [lv.concurrency for lv in doc.levels] == [1, 2]
    assert all(lv.completed == 20 for lv in doc.levels)
    assert doc.slo_passed is True
    rows = list(csv.DictReader(table.open()))
    assert [r["level"] for r in rows] == ["c=1", "c=2"]
    assert rows[0]["gpu_mem_peak_pct"] == "unavailable"
    assert float(rows[0]["e2e_p50_ms"]) >= 5.0
    printed = capsys.readouterr().out
    assert "GPU mem peak %" in printed and "unavailable" in printed and "Pass" in printed


def test_missed_slo_exits_1(loopback_http, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    argv = ["run", "-q", "--url", loopback_http.url + "/sleep/20", "--concurrency", "2", "--requests", "10"]
    code = main([*argv, "--latency-sla", "p95:5ms"])
    assert code == 1


def test_nothing_measured_exits_3(closed_port: int) -> None:
    code = main(
        ["run", "-q", "--url", f"http://127.0.0.1:{closed_port}/", "--concurrency", "1", "--requests", "3"]
    )
    assert code == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--url", "http://127.0.0.1:1/", "--concurrency", "1", "--rate", "2"],
        ["run", "--url", "http://127.0.0.1:1/", "--concurrency", "x"],
        ["run", "--url", "http://127.0.0.1:1/", "--concurrency", "1", "--latency-sla", "p42:3ms"],
        ["run", "--plan", "p.yaml", "--url", "http://127.0.0.1:1/"],
        ["run", "--url", "http://127.0.0.1:1/", "--concurrency", "0"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(argv) == 2
    assert "mcp-bench: error:" in capsys.readouterr().err


def test_bad_plan_file_names_the_field(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    plan = tmp_path / "p.yaml"
    plan.write_text("url: http://127.0.0.1:1/\nlevels: {concurrency: [1]}\nstage: {duraton_s: 1}\n")
    assert main(["run", "--plan", str(plan)]) == 2
    err = capsys.readouterr().err
    assert "stage.duraton_s" in err


def test_merge_and_show(loopback_http, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    shards = []
    for i in range(2):
        path = tmp_path / f"shard{i}.json"
        argv = ["run", "-q", "--url", loopback_http.url + "/ok", "--rate", "100", "--arrival", "constant"]
        assert main([*argv, "--requests", "30", "--output", str(path)]) == 0
        shards.append(str(path))
    merged = tmp_path / "merged.json"
    assert main(["merge", *shards, "-o", str(merged), "-q"]) == 0
    doc = loads_document(merged.read_text())
    assert doc.shards == 2 and doc.levels[0].sent == 60 and doc.levels[0].requested_rate == 200.0
    capsys.readouterr()
    assert main(["show", str(merged)]) == 0
    assert "r=200/s" in capsys.readouterr().out
    # a tampered shard is refused, not merged
    data = json.loads(Path(shards[0]).read_text())
    data["levels"][0]["completed"] += 1
    Path(shards[0]).write_text(json.dumps(data))
    assert main(["merge", *shards, "-o", str(tmp_path / "bad.json")]) == 2
    assert "crc32c mismatch" in capsys.readouterr().err
    assert main(["show", shards[0]]) == 2
