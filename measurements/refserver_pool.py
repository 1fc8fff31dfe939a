"""The reference server as several processes on one port (SO_REUSEPORT), each with its own truth.

Why: one Python process writes some thousands of stream chunks a second; past that it is late on
its own model and the truth it records is no longer the model's. With ``procs`` processes the
kernel spreads the connections over them (SO_REUSEPORT), and each one also listens on a private
port of its own, where its ``/debug/timings`` (and so its own lateness) is read: a request on the
shared port would reach a random process.

    python measurements/refserver_pool.py --procs 4 --ttft-ms 20 --tpot-ms 5   # serves until ^C
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from mcp_refserver.__main__ import build_parser, config_from_args
from mcp_refserver.app import build_app
from mcp_refserver.loop import precise_event_loop, until_signalled


async def _serve_child(args: argparse.Namespace) -> None:
    """One process: the shared port (reuse_port) and a private one, both on one app."""
    config = config_from_args(args)
    app, _ = build_app(config)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    shared = web.TCPSite(runner, config.host, config.port, backlog=4096, reuse_port=True)
    await shared.start()
    private = web.TCPSite(runner, config.host, 0)
    await private.start()
    ports = [addr[1] for addr in runner.addresses]
    print(f"{ports[0]} {ports[1]}", flush=True)
    try:
        await until_signalled()
    finally:
        await runner.cleanup()


def child_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    with asyncio.Runner(loop_factory=precise_event_loop) as runner:
        runner.run(_serve_child(args))
    return 0


@dataclass
class ServerPool:
    """``procs`` reference-server processes sharing ``url``; ``admin`` holds each one's own URL."""

    url: str = ""
    admin: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def timings(self, reset: bool = True) -> dict[str, list[Any]]:
        """Every process's ``/debug/timings`` joined (request order within a process only)."""
        joined: dict[str, list[Any]] = {}
        for base in self.admin:
            with urllib.request.urlopen(f"{base}/debug/timings?reset={int(reset)}", timeout=60) as r:
                for key, values in json.loads(r.read()).items():
                    joined.setdefault(key, []).extend(values)
        return joined

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def start_pool(procs: int, server_args: list[str], host: str = "127.0.0.1") -> ServerPool:
    """Start ``procs`` processes (the first picks the port, the others join it)."""
    pool = ServerPool()
    port = 0
    try:
        for _ in range(procs):
            cmd = [sys.executable, __file__, "--child", "--host", host, "--port", str(port), *server_args]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            pool.procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline().split()
            if len(line) != 2 or not all(p.isdigit() for p in line):
                raise RuntimeError(f"refserver process did not start: {line!r}")
            port = int(line[0])
            pool.admin.append(f"http://{host}:{int(line[1])}")
    except BaseException:
        pool.stop()
        raise
    pool.url = f"http://{host}:{port}"
    return pool


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=2)
    args, server_args = ap.parse_known_args(argv)
    pool = start_pool(args.procs, server_args)
    print(f"{pool.url} ({args.procs} processes; own timings at {', '.join(pool.admin)})", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        pool.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
