"""Every sample and example of our kinds is accepted by the real API server as written
(schema, CEL rules), so a user who copies one is never the first to find it broken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
FILES = sorted(
    p
    for folder in ("manifests/samples", "manifests/examples")
    for p in (REPO / folder).glob("*.yaml")
    if any(d and d.get("apiVersion", "").startswith("mcp2026.io/") for d in yaml.safe_load_all(p.read_text()))
)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_the_api_server_accepts_it(kube: Any, path: Path) -> None:
    docs = [
        d
        for d in yaml.safe_load_all(path.read_text())
        if d and d.get("apiVersion", "").startswith("mcp2026.io/")
    ]
    for doc in docs:
        doc["metadata"].pop("namespace", None)  # into the test's namespace
    text = yaml.safe_dump_all(docs)
    result = kube.run(
        "apply", "--dry-run=server", "--validate=strict", "-f", "-", input_text=text, check=False
    )
    assert result.returncode == 0, result.stderr


def test_there_are_samples_of_both_kinds() -> None:
    kinds = {d["kind"] for p in FILES for d in yaml.safe_load_all(p.read_text()) if d}
    assert {"MCPReadiness", "MCPBenchmark"} <= kinds
