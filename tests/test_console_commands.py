"""Every installed command answers ``--help`` under ``-OO`` as without it: the operator's image
runs Python with ``PYTHONOPTIMIZE=2`` (no docstrings), and a drill's load runs ``mcp-bench`` as a
child process that inherits it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.parametrize("optimize", ["", "-OO"])
def test_help_runs(name: str, optimize: str) -> None:
    module, function = SCRIPTS[name].split(":")
    code = f"import sys; from {module} import {function}; sys.exit({function}(['--help']))"
    done = subprocess.run(
        [sys.executable, *([optimize] if optimize else []), "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
