"""``mcp-operator dev-cluster build|up|down|env|status``: the local control plane by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import build
from .cluster import ClusterState, DevCluster, default_state_dir


def dev_cluster(action: str, state_dir: Path | None) -> int:
    directory = state_dir or default_state_dir()
    if action == "build":
        for name, path in build.ensure_all().items():
            print(f"{name}: {path}")
        return 0
    if action == "up":
        state = DevCluster(directory).up()
        print(f"control plane ready in {state.startup_seconds['total']:.1f}s", file=sys.stderr)
        print(f"export KUBECONFIG={state.kubeconfig}")
        return 0
    if action == "down":
        DevCluster(directory).down()
        return 0
    try:
        state = ClusterState.load(directory)
    except FileNotFoundError:
        print(f"no cluster recorded in {directory}", file=sys.stderr)
        return 1
    if action == "env":
        print(f"export KUBECONFIG={state.kubeconfig}")
    else:
        print(
            json.dumps(
                {"server": state.server, "pids": state.pids, "startup": state.startup_seconds}, indent=2
            )
        )
    return 0
