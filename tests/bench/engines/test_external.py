"""What the external engines share: the tool subprocess (timeouts, cancellation) and the line tail."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from mcp_bench.engines.external import (
    EngineUnavailableError,
    ExternalEngineError,
    ExternalLevel,
    LineTail,
    find_tool,
    run_tool,
)
from mcp_bench.engines.runloop import level_accumulator, level_metas
from mcp_bench.plan import RunPlan

SLEEPER = [sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(30)"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_line_tail_hands_over_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    seen: list[str] = []
    tail = LineTail(path, seen.append)
    tail.poll()  # no file yet: nothing, no error
    with path.open("a") as f:
        f.write("one\ntw")
    tail.poll()
    assert seen == ["one"]
    with path.open("a") as f:
        f.write("o\n\nthree")
    tail.poll()
    assert seen == ["one", "two"]
    tail.poll(final=True)  # the tool has exited: a last line without newline still counts
    assert seen == ["one", "two", "three"] and tail.lines == 3


async def test_run_tool_reports_exit_code_and_output(tmp_path: Path) -> None:
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1

    code = "import sys, time; print('out'); time.sleep(0.6); sys.stderr.write('err'); sys.exit(3)"
    run = await run_tool([sys.executable, "-c", code], cwd=tmp_path, on_tick=tick)
    assert run.returncode == 3
    assert run.stdout_tail.strip() == "out" and run.stderr_tail == "err"
    assert ticks >= 1  # called while the tool ran


async def test_level_tool_run_tails_its_record_file_while_it_runs_and_after(tmp_path: Path) -> None:
    plan = RunPlan.from_dict(
        {"url": "http://127.0.0.1:9/x", "levels": {"concurrency": [1]}, "stage": {"requests": 3}}
    )
    meta = level_metas(plan)[0]
    seen_at_tick: list[int] = []
    seen: list[str] = []
    level = ExternalLevel(
        plan, meta, tmp_path, level_accumulator(plan, meta, 0), lambda: seen_at_tick.append(len(seen))
    )
    # Two lines, a pause long enough for a tick, then a last line without a newline.
    code = (
        "import sys, time; f = open(sys.argv[1], 'a'); f.write('a\\nb\\n'); f.flush(); time.sleep(0.8); "
        "f.write('c'); f.close(); sys.exit(4)"
    )
    records = tmp_path / "records.txt"
    run = await level.run_tailed(
        [sys.executable, "-c", code, str(records)], env=dict(os.environ), records=records, parse=seen.append
    )
    assert run.returncode == 4
    assert seen == ["a", "b", "c"]
    assert seen_at_tick and max(seen_at_tick) >= 2  # lines reached the parser while the tool still ran


async def test_run_tool_stops_a_tool_past_its_time(tmp_path: Path) -> None:
    with pytest.raises(ExternalEngineError, match="ran past"):
        await run_tool(SLEEPER, cwd=tmp_path, timeout_s=0.3)
    pid = int((tmp_path / "stdout.log").read_text().split()[0])
    assert not _alive(pid)


async def test_cancelling_a_run_stops_the_tool(tmp_path: Path) -> None:
    task = asyncio.create_task(run_tool(SLEEPER, cwd=tmp_path))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int((tmp_path / "stdout.log").read_text().split()[0])
    assert not _alive(pid)


async def test_missing_tools_are_reported(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailableError, match="cannot start"):
        await run_tool([str(tmp_path / "nope")], cwd=tmp_path)
    with pytest.raises(EngineUnavailableError, match="no-such-tool-x not found on PATH; get it"):
        find_tool("no-such-tool-x", None, "get it")
    assert find_tool("python", sys.executable, "") == sys.executable
