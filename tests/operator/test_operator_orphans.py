"""Helper processes end with the operator: a SIGKILLed ``mcp-operator run`` left its probe
workers waiting on their queue for good (each holds both ends of it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mcp_devcluster.processes import running

PROBER_PARENT = """
import asyncio, json, multiprocessing, sys, time
from mcp_operator.readiness.prober import Prober

async def main():
    prober = Prober(2, 2)
    await prober.ready()
    print(json.dumps([p.pid for p in multiprocessing.active_children()]), flush=True)
    time.sleep(600)

asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_probe_workers_end_when_the_operator_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PROBER_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        workers = json.loads(parent.stdout.readline())
        assert len(workers) >= 2 and all(running(pid) for pid in workers), workers
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 30
        while any(running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if running(pid)], "workers outlived their killed parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_a_helper_whose_parent_is_already_gone_ends_at_once() -> None:
    """The parent may die before the helper asks for the signal: it checks and ends itself."""
    code = "from mcp_operator.orphans import die_with_parent; die_with_parent(1); import time; time.sleep(30)"
    started = time.monotonic()
    ended = subprocess.run([sys.executable, "-c", code], timeout=60, check=False)
    assert ended.returncode == -signal.SIGTERM and time.monotonic() - started < 30
