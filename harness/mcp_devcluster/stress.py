"""``mcp-devcluster stress``: run pytest several times on a deliberately busy machine.

A test that compares a time or a rate with ground truth must hold on a loaded host, not only on
an idle one (CI shares its machine). This keeps one core busy with a CPU hog and a second local
control plane running beside the tests' own (its etcd, API server, controllers and kubelets
compete for the same cores), then runs pytest ``runs`` times with the given arguments (``make
test-stress`` selects the tests marked ``timing``). Any failed run fails the whole, and each run
prints one line with its exit code and time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .cluster import DevCluster

HOG = "while True: pass"


@contextmanager
def cpu_hog() -> Iterator[subprocess.Popen[bytes]]:
    """One process spinning on one core for as long as the block runs."""
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


@contextmanager
def second_cluster(state_dir: Path) -> Iterator[str]:
    """A second local control plane (its own address slot), up for as long as the block runs."""
    cluster = DevCluster(state_dir)
    try:
        yield cluster.up().kubeconfig
    finally:
        cluster.down()


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def run_stressed(pytest_args: list[str], runs: int, *, hog: bool = True, cluster: bool = True) -> int:
    """``runs`` pytest runs under load; 0 only when every one passed. A SIGTERM ends it through
    the same cleanup as a normal end (the hog, the second control plane and the running pytest
    stopped): stopped by a plain ``kill``, it left both running for hours."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    codes: list[int] = []
    with tempfile.TemporaryDirectory(prefix="mcp-stress-") as tmp, ExitStack() as load:
        kubeconfig = load.enter_context(second_cluster(Path(tmp) / "cluster")) if cluster else None
        if hog:
            load.enter_context(cpu_hog())
        print(
            f"load: {'a CPU hog on one core' if hog else 'no hog'}, "
            + (f"a second control plane ({kubeconfig})" if kubeconfig else "no second control plane"),
            flush=True,
        )
        for run in range(1, runs + 1):
            started = time.monotonic()
            code = subprocess.call([sys.executable, "-m", "pytest", *pytest_args])
            codes.append(code)
            print(f"stress run {run}/{runs}: exit {code} in {time.monotonic() - started:.0f}s", flush=True)
    failed = [i + 1 for i, code in enumerate(codes) if code != 0]
    print(f"stress: {runs - len(failed)} of {runs} runs passed" + (f"; failed: {failed}" if failed else ""))
    return 0 if not failed else 1
