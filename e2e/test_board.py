"""The board of a real drill: the printer columns while it runs and after, ``kubectl mcp board``
found by kubectl as a plugin on PATH, and ``mcp-operator report --kind mcpr``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp_devcluster import stack

SCALE_DOWN = {"kind": "scaleDown", "workload": "srv", "replicas": 1, "atSeconds": 0.2}


def _table(kube: Any, *extra: str) -> dict[str, str]:
    """``kubectl get mcpr board`` (the API server's printer columns) as column -> cell."""
    lines = kube.run("get", "mcpr", "board", *extra).stdout.splitlines()
    header, row = lines[0], lines[1]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    bounds = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, bounds, strict=True)}


def _plugin_path(tmp_path: Path) -> str:
    """PATH with ``kubectl-mcp`` as pyproject installs it (this checkout's, not an older install)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "kubectl-mcp"
    plugin.write_text(f'#!/bin/sh\nexec {sys.executable} -m mcp_operator.board.command "$@"\n')
    plugin.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def test_a_drills_board_while_it_runs_and_after(kube: Any, refserver: str, tmp_path: Path) -> None:
    kube.run("label", "namespace", kube.namespace, "mcp2026.io/fault-injection=enabled")
    kube.apply(stack.kwok_deployment())
    stack.until(
        lambda: int(kube.get("deployment", "srv").get("status", {}).get("readyReplicas") or 0) == 3,
        "srv ready",
    )
    spec = {
        "target": {"url": refserver},
        "checks": {"healthProbe": {"requests": 100, "minSuccessRatio": 0.99, "maxProberLagMs": 250}},
        "drill": {
            "profile": "MCP2026",
            "scale": 0.004,
            "kpis": {"healthSuccessRatio": 0.98},
            "stages": [{"name": "mixed", "faults": [SCALE_DOWN]}],
        },
    }
    kube.apply(stack.custom_resource("MCPReadiness", "board", spec))
    # while the drill runs: Reason Evaluating, no verdict and no score in the default columns
    deadline = time.monotonic() + 60
    running: dict[str, str] = {}
    while time.monotonic() < deadline and running.get("REASON") != "Evaluating":
        running = _table(kube)
        time.sleep(0.2)
    assert running.get("REASON") == "Evaluating", running
    assert running["READY"] == "Unknown" and running["VERDICT"] in ("", "<none>"), running

    waited = kube.wait("mcpreadiness/board", "condition=Complete", timeout_s=120)
    obj = kube.get("mcpreadiness", "board")
    assert waited.returncode == 0, json.dumps(obj.get("status"), indent=1)
    status = obj["status"]
    ready = stack.condition_of(obj)
    done = _table(kube, "-o", "wide")
    assert done["READY"] == ready["status"] and done["REASON"] == ready["reason"], done
    assert done["VERDICT"] == status["verdict"] == done["LAST"] and done["STAGE"] == "3/3", done
    # every stage ran window by window (what the report's timeline draws), with its own times
    for stage in status["stages"]:
        offsets = [w["offsetSeconds"] for w in stage["windows"]]
        assert offsets and offsets[0] == 0 and offsets == sorted(set(offsets)), stage
        assert sum(w["errors"] for w in stage["windows"]) == stage["errors"], stage
        assert stage["startedAt"] <= stage["endedAt"], stage

    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "COLUMNS": "160"}
    env["PATH"] = _plugin_path(tmp_path)
    shown = subprocess.run(
        [str(stack.kubectl_path()), "mcp", "board", "board", "-n", kube.namespace],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    print(shown.stdout)
    # the exit-code table of every kubectl mcp command: 0 Ready, 1 a Fail, 3 nothing verified
    expected = 0 if ready["status"] == "True" else (1 if status["verdict"] == "Fail" else 3)
    assert shown.returncode == expected, shown.stderr
    text = " ".join(shown.stdout.split())
    assert f"Verdict {status['verdict']}" in text and "Stage 3/3" in text
    assert "recoverySeconds mixed-0" in text and "mixed-0 scaleDown mixed" in text and "Reverted" in text
    missing = subprocess.run(
        [str(stack.kubectl_path()), "mcp", "board", "nothing", "-n", kube.namespace],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert missing.returncode == 2 and "not found" in missing.stderr

    html = tmp_path / "board.html"
    command = ["report", "board", "--kind", "mcpr", "-n", kube.namespace, "-o", str(html)]
    made = subprocess.run(
        [sys.executable, "-m", "mcp_operator.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    page = html.read_text(encoding="utf-8")
    assert 'id="chart-timeline"' in page and 'id="faults"' in page
