"""The loopback registry the README's own-cluster path pushes to, started for real: it answers
the registry API's version check, holds nothing until pushed to, and is gone once stopped."""

from __future__ import annotations

import json
import shutil
import tomllib
import urllib.request
from pathlib import Path

import pytest

from mcp_devcluster import registry
from mcp_devcluster.processes import accepts
from mcp_devcluster.realnode import runtime


def test_its_configuration_listens_on_loopback_only_and_stores_under_the_given_directory(
    tmp_path: Path,
) -> None:
    settings = json.loads(registry.config(tmp_path / "blobs", 5123))
    assert settings["http"]["addr"] == "127.0.0.1:5123"
    assert settings["storage"]["filesystem"]["rootdirectory"] == str(tmp_path / "blobs")
    assert "auth" not in settings


@pytest.mark.skipif(shutil.which("docker-registry") is None, reason="docker-registry: make system-packages")
def test_it_answers_the_registry_api_on_loopback_and_stops(tmp_path: Path) -> None:
    started = registry.start(tmp_path / "registry")
    try:
        with urllib.request.urlopen(f"{started.url}/v2/", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Docker-Distribution-Api-Version"] == "registry/2.0"
        with urllib.request.urlopen(f"{started.url}/v2/_catalog", timeout=10) as response:
            assert json.load(response) == {"repositories": []}
        assert started.manifest_digest("mcp-operator", "0.1.0") is None  # nothing pushed
    finally:
        registry.stop(started)
    assert started.process.exited() is not None
    assert not accepts(started.port)


def test_the_real_nodes_containerd_is_told_to_pull_from_it_over_http(tmp_path: Path) -> None:
    """containerd reads ``<config_path>/<host>/hosts.toml`` on each pull: the node's config
    names the directory, and the file sends ``127.0.0.1:<port>`` pulls there over HTTP."""
    paths = runtime.RuntimePaths(tmp_path / "ctd", runtime.short_run_dir(tmp_path, "containerd"))
    cfg = tomllib.loads(runtime.containerd_config(paths, "docker.io/mcp-operator/pause:v1"))
    assert cfg["plugins"]["io.containerd.grpc.v1.cri"]["registry"] == {
        "config_path": str(paths.registry_hosts)
    }
    written = runtime.trust_http_registry(paths, "127.0.0.1:5123")
    assert written == paths.registry_hosts / "127.0.0.1:5123" / "hosts.toml"
    assert tomllib.loads(written.read_text()) == {"server": "http://127.0.0.1:5123"}
