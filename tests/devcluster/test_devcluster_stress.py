"""``mcp-devcluster stress``: pytest run several times under a CPU hog, failing on any failed run
(the second control plane is left out here: the e2e session starts real clusters enough)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_devcluster.cluster import DevCluster
from mcp_devcluster.processes import running
from mcp_devcluster.stress import cpu_hog, run_stressed


def _test_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "test_under_load.py"
    path.write_text(f"def test_it():\n    {body}\n")
    return path


def test_every_run_passes_under_the_hog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = _test_file(tmp_path, "assert sum(range(1000)) == 499500")
    assert run_stressed(["-q", "-p", "no:cacheprovider", str(target)], 2, cluster=False) == 0
    out = capsys.readouterr().out
    assert "a CPU hog on one core" in out and "no second control plane" in out
    assert "stress run 1/2: exit 0" in out and "stress run 2/2: exit 0" in out
    assert "2 of 2 runs passed" in out


def test_one_failing_run_fails_the_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "ran-once"
    # fails on the second run only, as a flaky test would
    target = _test_file(
        tmp_path,
        f"import pathlib; p = pathlib.Path({str(marker)!r}); seen = p.exists(); p.touch(); assert not seen",
    )
    assert run_stressed(["-q", "-p", "no:cacheprovider", str(target)], 2, hog=False, cluster=False) == 1
    out = capsys.readouterr().out
    assert "stress run 1/2: exit 0" in out and "stress run 2/2: exit 1" in out
    assert "1 of 2 runs passed; failed: [2]" in out


def test_no_test_selected_is_a_failure(tmp_path: Path) -> None:
    """A marker that selects nothing (pytest's exit 5) must not pass as a stressed run."""
    target = _test_file(tmp_path, "pass")
    assert run_stressed(["-q", "-m", "no_such_marker", str(target)], 1, hog=False, cluster=False) == 1


def test_the_hog_really_burns_a_core_and_stops() -> None:
    with cpu_hog() as hog:
        stat = Path(f"/proc/{hog.pid}/stat")
        before = int(stat.read_text().split()[13])  # utime in clock ticks
        # burning, it gathers 0.1 s of CPU (0.2 s of wall time alone; on a host already busy it
        # gets its share, so it is given up to 10 s); one that sleeps or exited gathers none
        deadline = time.monotonic() + 10
        while int(stat.read_text().split()[13]) - before < 10:
            assert hog.poll() is None and time.monotonic() < deadline, "the hog did not burn"
            time.sleep(0.1)
    assert hog.poll() is not None


def test_a_cluster_without_simulated_nodes_needs_no_kwok(tmp_path: Path) -> None:
    assert DevCluster(tmp_path, nodes=[]).components == ["kubernetes", "etcd"]
    assert DevCluster(tmp_path).components == ["kubernetes", "etcd", "kwok"]


def test_a_sigterm_stops_the_hog_and_the_running_tests(tmp_path: Path) -> None:
    """Killed with a plain SIGTERM (as `kill` or a CI timeout does), nothing it started runs on."""
    started = tmp_path / "started"
    target = _test_file(
        tmp_path, f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(60)"
    )
    stress = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcp_devcluster.cli",
            "stress",
            "--runs",
            "1",
            "--no-cluster",
            "--",
            "-q",
            "-p",
            "no:cacheprovider",
            str(target),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and stress.poll() is None, (
            stress.stdout.read() if stress.stdout else ""
        )
        time.sleep(0.1)
    children = Path(f"/proc/{stress.pid}/task/{stress.pid}/children").read_text().split()
    try:
        assert len(children) == 2  # the hog and pytest
        stress.send_signal(signal.SIGTERM)
        assert stress.wait(timeout=30) != 0
        time.sleep(0.5)
        for pid in children:
            assert not running(pid), f"process {pid} outlived the stress run"
    finally:  # a failure here must not leave a hog burning a core
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
