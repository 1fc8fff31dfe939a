"""The helm binary the harness builds (``mcp-devcluster build helm``); tests skip, saying so,
where it has not been built yet (``make test`` builds it first)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mcp_devcluster import build

REPO = Path(__file__).resolve().parents[2]
KUBE_VERSION = "1.36.3"  # the control plane the e2e tests run


@pytest.fixture(scope="session")
def helm() -> Callable[..., subprocess.CompletedProcess[str]]:
    component = build.components()["helm"]
    if not component.is_built():
        pytest.skip("helm is not built yet: `mcp-devcluster build helm` (make test does it)")
    binary = str(component.binary("helm"))

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
        return result

    return run
