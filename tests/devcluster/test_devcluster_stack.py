"""The harness's operator process: one that never leads is not left running (a measurement or a
test whose start failed never got it back to stop, and it would outlive its cluster)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from mcp_devcluster import stack
from mcp_devcluster.processes import StartupError


def _kubeconfig_of_nothing(path: Path) -> Path:
    """A kubeconfig naming a local port that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "none", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "none", "user": {"token": "none"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
        "current-context": "none",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_operator_that_never_leads_is_stopped_before_the_error(tmp_path: Path) -> None:
    kubeconfig = _kubeconfig_of_nothing(tmp_path / "kubeconfig")
    with pytest.raises(StartupError, match="not leading after 5s"):  # alive, never leading
        stack.start_operator(kubeconfig, tmp_path, identity="never-leads", timeout_s=5)
    started = stack._STARTED[(str(kubeconfig), "never-leads")]
    try:
        assert started.exited() is not None
    finally:
        stack.stop(started)  # when the assertion fails, not left behind by the test either
