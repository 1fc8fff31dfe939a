"""The import contracts in pyproject.toml state the real rule: no import is ignored, and the
operator's list of what it may not import from the libraries is every module but their faces."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FACES = {"api", "models"}
LIBRARIES = {"mcp_bench": REPO / "bench" / "mcp_bench", "mcp_checks": REPO / "checks" / "mcp_checks"}


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def _modules(package: Path) -> set[str]:
    """The package's modules and subpackages one level down, by name."""
    found = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    return found


def test_no_contract_ignores_an_import() -> None:
    ignoring = [c["name"] for c in _contracts() if c.get("ignore_imports")]
    assert ignoring == [], f"contracts with an ignore list: {ignoring}"


def test_the_operator_may_import_the_libraries_only_through_their_faces() -> None:
    (contract,) = [c for c in _contracts() if c.get("source_modules") == ["mcp_operator"]]
    forbidden = set(contract["forbidden_modules"])
    for name, package in LIBRARIES.items():
        behind = {f"{name}.{module}" for module in _modules(package) - FACES}
        assert behind - forbidden == set(), f"the operator could import directly: {behind - forbidden}"
        assert {f"{name}.{face}" for face in FACES} & forbidden == set()
