"""The release workflow a maintainer runs (.github/workflows/release.yaml), checked by actionlint
(built from the Go module proxy): syntax, expressions, job needs and the inputs of the actions."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from mcp_devcluster import build

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    binary = build.binary("actionlint", "actionlint")
    return subprocess.run(
        [str(binary), "-no-color", *map(str, files)], capture_output=True, text=True, timeout=120, check=False
    )


def test_every_workflow_passes_actionlint() -> None:
    files = sorted(WORKFLOWS.glob("*.y*ml"))
    assert files, f"no workflow in {WORKFLOWS}"
    linted = actionlint(*files)
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_actionlint_finds_what_is_wrong_in_a_workflow(tmp_path: Path) -> None:
    """The check above can fail: a job that needs one that does not exist, and an unknown input."""
    broken = yaml.safe_load((WORKFLOWS / "release.yaml").read_text())
    broken["jobs"]["charts"]["needs"] = ["version", "imag"]
    broken["jobs"]["python"]["steps"][1]["with"]["python-versio"] = "3.11"
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    file = tmp_path / ".github" / "workflows" / "release.yaml"
    file.write_text(yaml.safe_dump(broken, sort_keys=False))
    linted = actionlint(file)
    assert linted.returncode == 1, linted.stdout + linted.stderr
    assert '"imag"' in linted.stdout and '"python-versio"' in linted.stdout, linted.stdout


def _uses(job: dict[str, Any]) -> list[str]:
    return [str(step["uses"]).split("@")[0] for step in job["steps"] if "uses" in step]


def test_a_release_publishes_the_image_both_charts_and_the_distributions() -> None:
    workflow = yaml.safe_load((WORKFLOWS / "release.yaml").read_text())
    jobs = workflow["jobs"]
    build_push = next(
        s for s in jobs["image"]["steps"] if str(s.get("uses", "")).startswith("docker/build-push")
    )
    assert build_push["with"]["context"] == "." and build_push["with"]["push"] is True  # the Dockerfile
    charts = next(s["run"] for s in jobs["charts"]["steps"] if "run" in s)
    assert "for chart in mcp-operator mcp-operator-crds" in charts and "helm push" in charts
    assert all(
        (REPO / "charts" / name / "Chart.yaml").is_file() for name in ("mcp-operator", "mcp-operator-crds")
    )
    assert "pypa/gh-action-pypi-publish" in _uses(jobs["python"])
    assert jobs["python"]["permissions"]["id-token"] == "write"
