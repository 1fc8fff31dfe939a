"""The protocol modules import each other without a cycle.

Every import counts, also those inside functions and under ``TYPE_CHECKING``: a cycle hidden in
a function still ties the two modules together, and makes the one that is imported first depend
on the order in which they are loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mcp_bench.protocols

PACKAGE = "mcp_bench.protocols"
PACKAGE_DIR = Path(mcp_bench.protocols.__file__).parent


def _module_names() -> set[str]:
    return {path.stem for path in PACKAGE_DIR.glob("*.py")}


def _imported_modules(source: str, modules: set[str]) -> set[str]:
    """The modules of the package that ``source`` imports (``__init__`` for the package itself)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for target in targets:
            if target == PACKAGE:
                found.add("__init__")
            elif target.startswith(PACKAGE + "."):
                name = target[len(PACKAGE) + 1 :].split(".", 1)[0]
                if name in modules:
                    found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name in modules:
        imported = _imported_modules((PACKAGE_DIR / f"{name}.py").read_text(encoding="utf-8"), modules)
        graph[name] = imported - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as the list of its modules (first one repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            cycle = visit(nxt)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_the_check_sees_a_cycle_through_a_function_level_import() -> None:
    modules = {"a", "b"}
    a = "from mcp_bench.protocols.b import thing\n"
    b = "def f() -> None:\n    from mcp_bench.protocols.a import other\n"
    graph = {"a": _imported_modules(a, modules), "b": _imported_modules(b, modules)}
    assert find_cycle(graph) == ["a", "b", "a"]


def test_the_protocol_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph()
    assert {"http", "http_fast", "openai", "openai_fast"} <= graph.keys()
    assert find_cycle(graph) is None
