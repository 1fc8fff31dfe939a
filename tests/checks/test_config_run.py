"""The runner's failure paths, without a cluster: an API that does not answer."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client

from mcp_checks.config import ConfigConsistencySpec, run_config_consistency
from mcp_checks.verdict import Verdict


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_api_is_inconclusive_and_names_the_source() -> None:
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{_closed_port()}"
    cfg.retries = 0
    spec = ConfigConsistencySpec("ns", "web", config_maps=("app",), timeout_s=5)
    with client.ApiClient(cfg) as api:
        out = await run_config_consistency(spec, api)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "KubernetesApiUnreachable")
    assert cfg.host in out.source and "Deployment ns/web" in out.source


def test_spec_needs_something_to_hash() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ConfigConsistencySpec("ns", "web")
