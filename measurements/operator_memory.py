"""The operator's resident memory with and without the image's Python setting (``-OO``), side by
side on one real control plane: operators started one after another, alternating the setting,
each measured at rest with no gates, then again over ``--gates`` decided MCPReadiness (a new
operator adopting them, as after a restart).

The memory is the operator's own process (``VmRSS``) ``--settle`` seconds after it leads, once
the heap's trim has run (every 10 s). ``-OO`` is what ``stack.IMAGE_PYTHON_ENV`` and the
Dockerfile set; "without" runs the same code with ``PYTHONOPTIMIZE`` empty.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from operator_scale import apply_and_time, rss_mib, scale_cluster, size

from mcp_devcluster import stack

SETTINGS = {"-OO (the image's)": {}, "without -OO": {"PYTHONOPTIMIZE": ""}}


def measure(kubeconfig: Path, work: Path, label: str, env: dict[str, str], settle_s: float) -> float:
    """One operator started with ``env``: its memory ``settle_s`` after it leads."""
    identity = f"memory-{time.monotonic_ns()}"
    operator = stack.start_operator(kubeconfig, work, identity=identity, env=env)
    try:
        time.sleep(settle_s)
        assert operator.process.popen is not None
        own, _ = rss_mib(operator.process.popen.pid)
        print(f"  {label}: {size(own)}", flush=True)
        return own
    finally:
        stack.stop(operator.process)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gates", type=int, default=1000, help="decided MCPReadiness for the second part")
    parser.add_argument("--rounds", type=int, default=3, help="operators per setting and part")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after it leads")
    args = parser.parse_args()

    with scale_cluster("mcp-memory-") as (work, running):
        kubeconfig = running.kubeconfig
        stack.stop(running.operator.process)
        print("at rest, no gates:")
        for _ in range(args.rounds):
            for label, env in SETTINGS.items():
                measure(kubeconfig, work, label, env, args.settle)

        judge = stack.start_operator(kubeconfig, work, identity="memory-judge")
        stack.kubectl(kubeconfig, "create", "namespace", "scale")
        decided = apply_and_time(kubeconfig, "scale", running.refserver_url, args.gates, "memory")
        stack.stop(judge.process)
        print(f"a new operator over {args.gates} decided gates ({dict(decided['verdicts'])}):")
        for _ in range(args.rounds):
            for label, env in SETTINGS.items():
                measure(kubeconfig, work, label, env, args.settle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
