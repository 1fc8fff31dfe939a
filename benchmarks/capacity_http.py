"""Capacity of one load-generator core: mcp-bench's built-in engine vs Locust FastHttpUser.

Starts a minimal keep-alive HTTP server in its own process (pinned away from the client core where
the OS allows), then:

1. mcp-bench open loop at increasing constant rates; for each, achieved rate and schedule lag P99.
   The capacity is the highest rate whose lag P99 stays under 1 ms with nothing dropped or failed.
2. Locust FastHttpUser, headless, one process, no wait time, many users: the requests/s it reaches.

Run: .venv/bin/python benchmarks/capacity_http.py [--rates 2000,4000,...] [--duration 5]
Everything runs on 127.0.0.1. Numbers depend on the machine; the script prints them as measured.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\nServer: capsrv/1\r\n\r\nok"


class _Fast(asyncio.Protocol):
    """Answers every request on a keep-alive connection with a fixed 200; request bodies are not expected."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        n = self.buf.count(b"\r\n\r\n")
        if n:
            self.buf = self.buf[self.buf.rfind(b"\r\n\r\n") + 4 :]
            self.t.write(RESPONSE * n)  # type: ignore[attr-defined]


def serve(port: int, cpus: list[int]) -> None:
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Fast, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def run_builtin(url: str, rate: float, duration: float, cap: int) -> dict[str, float | int | None]:
    """One open-loop level in a fresh process pinned to the client core."""
    code = (
        "import json,sys\n"
        "from mcp_bench.plan import RunPlan\n"
        "from mcp_bench.engines import run_plan_sync\n"
        f"plan = RunPlan.from_dict({{'url': {url!r}, 'levels': {{'rate': [{rate}], 'arrival': 'poisson', "
        f"'max_concurrency': {cap}}}, 'stage': {{'warmup_s': 1.0, 'duration_s': {duration}}}, "
        "'request_timeout_s': 10})\n"
        "lv = run_plan_sync(plan).levels[0]\n"
        "print(json.dumps({'sent': lv.sent, 'completed': lv.completed, 'failed': lv.failed, "
        "'dropped': lv.dropped, 'achieved_rate': lv.achieved_rate, 'throughput': lv.throughput_rps, "
        "'lag_p50_ms': lv.latency['schedule_lag'].p50_ms, 'lag_p99_ms': lv.latency['schedule_lag'].p99_ms, "
        "'e2e_p50_ms': lv.latency['e2e'].p50_ms, 'e2e_p99_ms': lv.latency['e2e'].p99_ms}))\n"
    )
    cpu0 = _children_cpu_s()
    out = subprocess.run(
        [*_pin(CLIENT_CPU), sys.executable, "-c", code], capture_output=True, text=True, timeout=duration + 60
    )
    cpu = _children_cpu_s() - cpu0
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    result: dict[str, float | int | None] = json.loads(out.stdout.strip().splitlines()[-1])
    # CPU per request over the whole process (start-up, warm-up and schedule included: pessimistic).
    result["cpu_s"] = cpu
    result["cpu_us_per_req"] = cpu / max(1, int(result["sent"] or 0) * (1 + 1.0 / duration)) * 1e6
    return result


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


LOCUSTFILE = """
from locust import FastHttpUser, constant, task

class U(FastHttpUser):
    wait_time = constant(0)

    @task
    def hit(self):
        self.client.get("/")
"""


def run_locust(url: str, users: int, duration: float) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as tmp:
        lf = Path(tmp) / "locustfile.py"
        lf.write_text(LOCUSTFILE)
        prefix = str(Path(tmp) / "res")
        cmd = [
            *_pin(CLIENT_CPU),
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(lf),
            "--headless",
            "-H",
            url,
            "-u",
            str(users),
            "-r",
            str(users),
            "-t",
            f"{int(duration) + 1}s",
            "--csv",
            prefix,
            "--only-summary",
            "--loglevel",
            "ERROR",
        ]
        cpu0 = _children_cpu_s()
        subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
        cpu = _children_cpu_s() - cpu0
        with open(prefix + "_stats.csv") as f:
            rows = {r["Name"]: r for r in csv.DictReader(f)}
        agg = rows["Aggregated"]
        return {
            "requests": int(agg["Request Count"]),
            "failures": int(agg["Failure Count"]),
            "rps": float(agg["Requests/s"]),
            "p50_ms": float(agg["50%"]),
            "p99_ms": float(agg["99%"]),
            "cpu_s": cpu,
            "cpu_us_per_req": cpu / max(1, int(agg["Request Count"])) * 1e6,
        }


CLIENT_CPU: list[int] = []


def _pin(cpus: list[int]) -> list[str]:
    return ["taskset", "-c", ",".join(map(str, cpus))] if cpus and _has_taskset() else []


def _has_taskset() -> bool:
    return subprocess.run(["which", "taskset"], capture_output=True).returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rates", default="1000,2000,3000,4000,5000,6000,8000")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--cap", type=int, default=256)
    ap.add_argument("--locust-users", default="32,128")
    ap.add_argument("--client-cpu", type=int, default=None, help="pin the client to this CPU")
    ap.add_argument("--server-cpus", default="", help="pin the server to these CPUs, e.g. 2,3")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, [int(c) for c in args.server_cpus.split(",") if c])
        return
    if args.client_cpu is not None:
        CLIENT_CPU.append(args.client_cpu)
    port = free_port()
    srv = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--server-cpus", args.server_cpus],
    )
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/"
        print(f"cpus={os.cpu_count()} client_cpu={args.client_cpu} server_cpus={args.server_cpus or 'any'}")
        best = None
        for rate in [float(r) for r in args.rates.split(",")]:
            r = run_builtin(url, rate, args.duration, args.cap)
            ok = (
                r["lag_p99_ms"] is not None
                and r["lag_p99_ms"] < 1.0
                and r["failed"] == 0
                and r["dropped"] == 0
            )
            print(
                f"mcp-bench rate={rate:g}/s " + " ".join(f"{k}={_f(v)}" for k, v in r.items()) + f" ok={ok}"
            )
            if ok:
                best = rate
        for users in [int(u) for u in args.locust_users.split(",")]:
            lr = run_locust(url.rstrip("/"), users, args.duration)
            print(f"locust FastHttpUser users={users} " + " ".join(f"{k}={_f(v)}" for k, v in lr.items()))
        print(f"mcp-bench capacity (lag P99 < 1 ms, no drops/failures): {best} req/s")
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def _f(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    main()
