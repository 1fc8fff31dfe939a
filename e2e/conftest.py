"""Fixtures for tests against a real control plane.

One control plane per test session (etcd, kube-apiserver, controller manager, scheduler,
kwok and the local kubelet, built from upstream sources on first use), the CRDs from
``crds/``, the operator as its own process, and the project's reference server. Each test
gets its own namespace. Everything is stopped at the end, also when a test fails.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from mcp_devcluster import stack
from mcp_devcluster.cluster import ClusterState, DevCluster
from mcp_devcluster.processes import ManagedProcess

REPO = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="also run the long e2e suite (tests marked long: every crash point, 1,000+ generated specs)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long: part of the long e2e suite; skipped unless --long is given")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_long = pytest.mark.skip(reason="part of the long suite: run with --long")
    for item in items:
        if str(item.fspath).startswith(str(Path(__file__).parent)):
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("long") is not None and not config.getoption("--long"):
            item.add_marker(skip_long)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    dev = DevCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield dev.up()
    finally:
        dev.down()


@pytest.fixture(scope="session")
def kubeconfig(cluster: ClusterState) -> Path:
    path = Path(cluster.kubeconfig)
    stack.apply_crds(path, REPO / "crds")
    return path


@pytest.fixture(scope="module")
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """A Kubernetes API client for the tests that read and write through the API directly."""
    api_client = config.new_client_from_config(str(kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture(scope="session")
def refserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = stack.start_refserver(
        tmp_path_factory.mktemp("refserver"), "--ttft-ms", "5", "--tpot-ms", "1"
    )
    try:
        yield url
    finally:
        stack.stop(proc)


@pytest.fixture(scope="session")
def operator(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[stack.OperatorProcess]:
    op = stack.start_operator(kubeconfig, tmp_path_factory.mktemp("operator"))
    try:
        yield op
    finally:
        stack.stop(op.process)
        print(f"operator log: {op.process.log_path}")


def _alive(operator: stack.OperatorProcess, kubeconfig: Path, log_dir: Path) -> None:
    """Start a new shared operator when the last one is gone: tests that stop, kill or replace it
    and then fail would otherwise leave every later test without one."""
    popen = operator.process.popen
    if popen is not None and popen.poll() is None:
        return
    replacement = stack.start_operator(kubeconfig, log_dir)
    operator.process = replacement.process
    operator.metrics_url = replacement.metrics_url
    operator.liveness_url = replacement.liveness_url


@dataclass
class Kube:
    """kubectl bound to one kubeconfig and one namespace."""

    kubeconfig: Path
    namespace: str

    def run(self, *args: str, input_text: str | None = None, check: bool = True, timeout: float = 120) -> Any:
        return stack.kubectl(
            self.kubeconfig, "-n", self.namespace, *args, input_text=input_text, check=check, timeout=timeout
        )

    def apply(self, text: str, check: bool = True) -> Any:
        return self.run("apply", "-f", "-", input_text=text, check=check)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.run("get", kind, name, "-o", "json").stdout)
        return result

    def wait(self, target: str, condition: str, timeout_s: int = 90) -> Any:
        return self.run(
            "wait",
            f"--for={condition}",
            target,
            f"--timeout={timeout_s}s",
            check=False,
            timeout=timeout_s + 30,
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        out = self.run(
            "get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json"
        ).stdout
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items


@pytest.fixture
def kube(
    kubeconfig: Path, operator: stack.OperatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kube]:
    _alive(operator, kubeconfig, tmp_path_factory.mktemp("operator"))
    namespace = f"e2e-{uuid.uuid4().hex[:8]}"
    stack.kubectl(kubeconfig, "create", "namespace", namespace)
    try:
        yield Kube(kubeconfig, namespace)
    finally:
        stack.kubectl(kubeconfig, "delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture
def sample() -> Any:
    def load(name: str, url: str) -> str:
        return stack.render_sample((REPO / "manifests" / "samples" / name).read_text(), url)

    return load


__all__ = ["Kube", "ManagedProcess"]
