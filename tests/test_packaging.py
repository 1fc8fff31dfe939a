"""What ``pip install .`` of the product ships: the product's packages and nothing of the test
harness (the local control plane and the reference server have their own distribution), and
runtime dependencies only for what the product imports."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_product_wheel_holds_no_harness(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("mcp_operator-*.whl")
    top = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    packages = {t for t in top if not t.endswith((".dist-info", ".data"))}
    assert packages == {"mcp_operator", "mcp_bench", "mcp_checks", "mcp_common"}


def test_runtime_dependencies_are_what_the_product_imports() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {
        dep.split(">")[0].split("<")[0].split("[")[0].split("=")[0].strip() for dep in project["dependencies"]
    }
    assert not names & {"jinja2", "cryptography", "matplotlib"}  # harness-only or an extra
    # the charts and the HTML report (`mcp-bench report`, `mcp-operator report`)
    assert project["optional-dependencies"]["plot"] == ["matplotlib>=3.8,<4", "jinja2>=3.1,<4"]
    harness = tomllib.loads((REPO / "harness" / "pyproject.toml").read_text())["project"]
    assert "cryptography>=42" in harness["dependencies"]


def test_the_image_copies_no_harness() -> None:
    """The build context is what .dockerignore lets through: the product's sources (and an
    offline build's wheelhouse), never the harness, tests or e2e."""
    kept = {line[1:] for line in (REPO / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    assert kept == {"pyproject.toml", "README.md", "operator", "bench", "checks", "common", "wheels"}
    assert "*" in (REPO / ".dockerignore").read_text().splitlines()
    assert "COPY . /src" in (REPO / "Dockerfile").read_text()
