"""Capacity of one load-generator core: mcp-bench's built-in engine vs Locust FastHttpUser.

Starts a minimal keep-alive HTTP server in its own process (pinned away from the client core where
the OS allows), then:

1. mcp-bench open loop, Poisson arrivals at increasing rates; for each, achieved rate and schedule lag P99.
   The capacity is the highest rate whose lag P99 stays under 1 ms with nothing dropped or failed.
2. Locust FastHttpUser, headless, one process, no wait time, many users: the requests/s it reaches.

Run: .venv/bin/python measurements/capacity_http.py --client-cpu 1 --server-cpus 0
     [--rates 8000,12000,...] [--duration 3] [--repeat 2] [--locust-users 16,32,128]
On a shared machine other processes add schedule lag: the script first prints the noise floor (how
late a bare 0.5 ms sleep wakes on the client CPU), runs ``--repeat`` rounds that interleave the two
tools so a busy spell hits both, keeps the best of the rounds, and ends with the ratio line to quote.
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

NOISE_CODE = """
import time
over = []
end = time.perf_counter() + DURATION
while time.perf_counter() < end:
    t = time.perf_counter_ns()
    time.sleep(0.0005)
    over.append(time.perf_counter_ns() - t - 500_000)
over.sort()
print(over[len(over) // 2] / 1e6, over[int(len(over) * 0.99)] / 1e6, over[-1] / 1e6, len(over))
"""


def noise_floor(duration: float) -> str:
    """How late a bare 0.5 ms sleep wakes on the client CPU: the lag no load generator can beat here."""
    code = NOISE_CODE.replace("DURATION", repr(duration))
    out = subprocess.run(
        [*_pin(CLIENT_CPU), sys.executable, "-c", code], capture_output=True, text=True, timeout=duration + 30
    )
    p50, p99, worst, n = out.stdout.split()
    return (
        f"noise floor (0.5 ms sleeps on the client CPU, n={n}): "
        f"overshoot p50={float(p50):.3f} p99={float(p99):.3f} max={float(worst):.3f} ms"
    )


def _pin(cpus: list[int]) -> list[str]:
    return ["taskset", "-c", ",".join(map(str, cpus))] if cpus and _has_taskset() else []


def _has_taskset() -> bool:
    return subprocess.run(["which", "taskset"], capture_output=True).returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rates", default="8000,12000,16000,20000")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--cap", type=int, default=256)
    ap.add_argument("--locust-users", default="16,32,128")
    ap.add_argument("--client-cpu", type=int, default=None, help="pin the client to this CPU")
    ap.add_argument("--server-cpus", default="", help="pin the server to these CPUs, e.g. 2,3")
    ap.add_argument(
        "--repeat", type=int, default=2, help="rounds of every run, interleaving the tools; the best counts"
    )
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
        print(noise_floor(args.duration), flush=True)
        rates = [float(r) for r in args.rates.split(",")]
        best: float | None = None
        best_cpu: float | None = None
        locust_best = 0.0
        locust_cpu: float | None = None
        # Rounds interleave the two tools, so a busy spell on a shared machine hits both alike; the
        # best of the rounds counts (other processes only ever add lag and remove throughput).
        for rnd in range(1, args.repeat + 1):
            for users in [int(u) for u in args.locust_users.split(",")]:
                lr = run_locust(url.rstrip("/"), users, args.duration)
                print(
                    f"round={rnd} locust FastHttpUser users={users} "
                    + " ".join(f"{k}={_f(v)}" for k, v in lr.items()),
                    flush=True,
                )
                if not lr["failures"] and float(lr["rps"]) > locust_best:
                    locust_best, locust_cpu = float(lr["rps"]), float(lr["cpu_us_per_req"])
            for rate in rates:
                r = run_builtin(url, rate, args.duration, args.cap)
                ok = (
                    r["lag_p99_ms"] is not None
                    and r["lag_p99_ms"] < 1.0
                    and r["failed"] == 0
                    and r["dropped"] == 0
                )
                print(
                    f"round={rnd} mcp-bench rate={rate:g}/s "
                    + " ".join(f"{k}={_f(v)}" for k, v in r.items())
                    + f" ok={ok}",
                    flush=True,
                )
                if ok and (best is None or rate > best):
                    best, best_cpu = rate, float(r["cpu_us_per_req"] or 0)
        print(f"mcp-bench capacity (lag P99 < 1 ms, no drops/failures): {best} req/s")
        print(f"locust FastHttpUser best (no failures, no rate limit): {locust_best:.0f} req/s")
        if best_cpu and locust_cpu:
            print(
                f"CPU per request (whole process): mcp-bench {best_cpu:.0f} us at {best:g}/s, "
                f"Locust {locust_cpu:.0f} us at {locust_best:.0f}/s"
            )
        print(ratio_line(best, locust_best))
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def ratio_line(best: float | None, locust_best: float) -> str:
    """The one line to quote: mcp-bench's lag-bounded capacity over Locust's best throughput."""
    if best is None or locust_best <= 0:
        return f"RATIO unavailable (mcp-bench capacity {best}, Locust best {locust_best:.0f} req/s)"
    return (
        f"RATIO mcp-bench/Locust = {best:g} / {locust_best:.0f} req/s = {best / locust_best:.2f}x "
        f"(goal >= 2x: {'met' if best >= 2 * locust_best else 'NOT met'})"
    )


def _f(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    main()
