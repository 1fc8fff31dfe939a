"""kubectl (for `kubectl kustomize`) as the harness builds it, and Debian's promtool; tests skip,
saying so, where either is missing (``make test`` installs both)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_devcluster import build

REPO = Path(__file__).resolve().parents[2]
Run = Callable[..., subprocess.CompletedProcess[str]]


def _runner(binary: str) -> Run:
    def run(*args: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{binary} {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return run


@pytest.fixture(scope="session")
def promtool() -> Run:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("promtool is missing: Debian's prometheus package ships it (make unit installs it)")
    return _runner(binary)


@pytest.fixture(scope="session")
def kubectl() -> Run:
    component = build.components()["kubernetes"]
    if not component.is_built():
        pytest.skip("kubectl is not built yet: `mcp-devcluster build kubernetes` (make test does it)")
    return _runner(str(component.binary("kubectl")))
