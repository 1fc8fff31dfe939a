"""A ClusterState as ``up`` records it, for the tests of what reads one back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_devcluster.cluster import ClusterState


def recorded_state(state_dir: Path, **fields: Any) -> ClusterState:
    """A state of ``state_dir`` (not saved): loopback defaults, ``fields`` replacing them."""
    values: dict[str, Any] = {
        "state_dir": str(state_dir),
        "kubeconfig": str(state_dir / "kubeconfig"),
        "server": "https://127.0.0.1:1",
        "etcd_port": 1,
        "apiserver_port": 1,
        "pids": {},
        "started_at": 0.0,
        "startup_seconds": {"total": 1.0},
    }
    return ClusterState(**{**values, **fields})
