"""The facade holds what its callers outside mcp_bench import, and nothing more: a name no caller
uses would widen the face the modules behind it must keep."""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_bench.api

ROOT = Path(__file__).resolve().parents[2]
CALLERS = ("operator", "harness", "measurements", "e2e", "tests")


def _names_imported_from_the_facade() -> set[str]:
    names: set[str] = set()
    for folder in CALLERS:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if "mcp_bench.api" not in text:
                continue
            tree = ast.parse(text)
            names |= {
                alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "mcp_bench.api"
                for alias in node.names
            }
    return names


def test_the_facade_exports_exactly_what_its_callers_import() -> None:
    assert set(mcp_bench.api.__all__) == _names_imported_from_the_facade()


def test_every_exported_name_resolves() -> None:
    for name in mcp_bench.api.__all__:
        assert getattr(mcp_bench.api, name) is not None, name
