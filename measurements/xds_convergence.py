"""xDS sync: the check's detection latency and the cost of one evaluation, on the real testbed.

1. Convergence: a control plane (go-control-plane) and ``--clients`` grpc-go xDS clients; for
   each of ``--changes`` snapshot changes, the time from the change to the first evaluation
   that sees every client ACKed on the new version (the check's own detection latency, which
   includes the poll interval ``--interval-ms``). Sources: the control plane's CSDS and each
   client's CSDS.
2. ``mcp-check xds --wait`` as CI runs it: the CLI started and polling, then a snapshot change;
   the time from the change to the CLI's exit (0), for ``--clients`` clients and for 10.
3. Cost of one evaluation against ``--proxies`` proxies: that many real client processes on
   one control plane, evaluated (a) through the control plane's one CSDS answer (``--proxies``
   node statuses) and (b) through every client's own CSDS as well (``--proxies`` + 1 sources).

    .venv/bin/python measurements/xds_convergence.py
    .venv/bin/python measurements/xds_convergence.py --clients 3 --changes 9 --proxies 100
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import statistics
import tempfile
import threading
import time
from pathlib import Path

from mcp_checks.cli import main as cli_main
from mcp_checks.verdict import Verdict
from mcp_checks.xds import XdsSource, XdsSyncSpec, measure_convergence, run_xds_sync
from mcp_devcluster.xdsbed import XdsBed


def _spec(bed: XdsBed, nodes: list[str], *, clients: bool, version: str) -> XdsSyncSpec:
    sources = [XdsSource("csds", bed.control_plane_csds)]
    if clients:
        sources += [XdsSource("csds", bed.clients[n].csds_address) for n in nodes]
    return XdsSyncSpec(
        sources=tuple(sources), expected_proxies=tuple(nodes), expected_version=version, timeout_s=10
    )


async def convergence(bed: XdsBed, nodes: list[str], changes: int, interval_s: float) -> list[float]:
    first = await measure_convergence(_spec(bed, nodes, clients=True, version="v1"), timeout_s=60)
    if first.seconds is None:
        raise SystemExit(f"the testbed never converged on v1: {first.outcome.message}")
    seconds = []
    for i in range(changes):
        version = f"v{i + 2}"
        started = time.monotonic()
        await asyncio.to_thread(bed.set_snapshot, version)
        spec = _spec(bed, nodes, clients=True, version=version)
        result = await measure_convergence(spec, started=started, timeout_s=30, interval_s=interval_s)
        if result.seconds is None:
            raise SystemExit(f"{version} did not converge: {result.outcome.message}")
        seconds.append(result.seconds)
    return seconds


def cli_wait(bed: XdsBed, nodes: list[str], version: str) -> float:
    """Seconds from the snapshot change to ``mcp-check xds --wait``'s return with exit 0: the
    CLI's own code (flags, the suite, the wait loop) in a thread of this process, already
    polling the old version when the change is made (process start-up is not counted)."""
    argv = ["xds", "--csds", bed.control_plane_csds, *[f"--proxy={n}" for n in nodes]]
    argv += ["--expected-version", version, "--wait", "60s"]
    done: dict[str, float | int] = {}

    def run() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            done["code"] = cli_main(argv)
        done["at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)  # polling the old version
    started = time.monotonic()
    bed.set_snapshot(version)
    thread.join(timeout=60)
    if done.get("code") != 0:
        raise SystemExit(f"mcp-check xds --wait exited {done.get('code')}")
    return done["at"] - started


async def cli_waits(tmp: Path, clients: int, changes: int) -> list[float]:
    nodes = [f"node-{i}" for i in range(clients)]
    with XdsBed(tmp / f"cli-{clients}", nodes) as bed:
        await measure_convergence(_spec(bed, nodes, clients=False, version="v1"), timeout_s=60)
        return [await asyncio.to_thread(cli_wait, bed, nodes, f"v{i + 2}") for i in range(changes)]


async def evaluation_cost(
    bed: XdsBed, nodes: list[str], clients: bool, repeats: int
) -> tuple[float, Verdict]:
    spec = _spec(bed, nodes, clients=clients, version="v1")
    costs, outcome = [], Verdict.ERROR
    for _ in range(repeats):
        started = time.perf_counter()
        result = await run_xds_sync(spec)
        costs.append(time.perf_counter() - started)
        outcome = result.outcome
    return statistics.median(costs), outcome


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--changes", type=int, default=9)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--proxies", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="xdsbed-") as tmp:
        nodes = [f"node-{i}" for i in range(args.clients)]
        with XdsBed(Path(tmp) / "convergence", nodes) as bed:
            seconds = await convergence(bed, nodes, args.changes, args.interval_ms / 1000)
        ms = sorted(s * 1000 for s in seconds)
        print(
            f"convergence, {args.clients} grpc-go clients, {args.changes} snapshot changes, poll every "
            f"{args.interval_ms:g} ms: median {statistics.median(ms):.1f} ms "
            f"(min {ms[0]:.1f}, max {ms[-1]:.1f})"
        )
        for clients in sorted({args.clients, 10}):
            waits = sorted(s * 1000 for s in await cli_waits(Path(tmp), clients, 3))
            print(
                f"mcp-check xds --wait, {clients} grpc-go clients, snapshot change -> exit 0: median "
                f"{statistics.median(waits):.1f} ms (min {waits[0]:.1f}, max {waits[-1]:.1f}; 3 changes)"
            )
        many = [f"proxy-{i:03d}" for i in range(args.proxies)]
        started = time.monotonic()
        with XdsBed(Path(tmp) / "many", many) as bed:
            boot = time.monotonic() - started
            ready = await measure_convergence(_spec(bed, many, clients=False, version="v1"), timeout_s=120)
            print(
                f"{args.proxies} real grpc-go client processes started in {boot:.1f}s, "
                f"all synced: {ready.seconds is not None}"
            )
            for clients, what in (
                (False, "1 CSDS source (control plane)"),
                (True, f"{args.proxies + 1} CSDS sources"),
            ):
                cost, outcome = await evaluation_cost(bed, many, clients, args.repeats)
                print(
                    f"one evaluation, {args.proxies} proxies via {what}: {cost * 1000:.1f} ms "
                    f"(median of {args.repeats}, verdict {outcome.value})"
                )


if __name__ == "__main__":
    asyncio.run(main())
