"""No two modules of ours import each other, directly or round a longer loop, in any package.

Every import counts, also those inside functions and under ``TYPE_CHECKING`` (grimp, the graph
behind import-linter, reads them all): a cycle hidden in a function still ties the modules
together and makes the one imported first depend on load order. A package's ``__init__``
re-exporting its own modules is not a cycle in itself, but whoever imports the package from
outside loads those modules too: such a "package-face" import counts as an import of each module
the ``__init__`` re-exports. Imports made by name through ``importlib.import_module("...")`` (a
string literal) count as well.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import grimp
import pytest

PACKAGES = ("mcp_operator", "mcp_bench", "mcp_checks", "mcp_common", "mcp_devcluster", "mcp_refserver")


def _is_ancestor(maybe_parent: str, module: str) -> bool:
    return module.startswith(maybe_parent + ".")


def _ours(module: str) -> bool:
    return module.split(".", 1)[0] in PACKAGES


def importlib_imports(module: str) -> set[str]:
    """Modules ``module`` imports through ``importlib.import_module("...")`` string literals."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return set()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def package_face(graph: grimp.ImportGraph, package: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The modules loaded by importing ``package``: its own modules its ``__init__`` imports,
    and theirs in turn when they are packages."""
    face = set()
    for target in graph.find_modules_directly_imported_by(package):
        if _is_ancestor(package, target) and target not in seen:
            face.add(target)
            face |= package_face(graph, target, seen | {package})
    return face


def module_graph(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Direct imports between modules, leaving out imports of a module's own ancestors; an import
    of a package from outside it also counts as importing its package face."""
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if not _ours(module):
            continue
        direct = set(graph.find_modules_directly_imported_by(module)) | {
            m for m in importlib_imports(module) if _ours(m) and m in graph.modules
        }
        targets = set()
        for target in direct:
            if not _ours(target) or _is_ancestor(target, module) or _is_ancestor(module, target):
                continue
            targets.add(target)
            targets |= {m for m in package_face(graph, target) if not _is_ancestor(m, module) and m != module}
        edges[module] = targets
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as its modules (the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            cycle = visit(nxt)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(edges):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def test_the_check_finds_a_cycle_through_a_longer_loop() -> None:
    edges = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert find_cycle(edges) == ["p.a", "p.b", "p.c", "p.a"]
    assert find_cycle({"p.a": {"p.b"}, "p.b": set()}) is None


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES)


def test_the_graph_sees_function_level_imports(graph: grimp.ImportGraph) -> None:
    # the CLI imports the shard entrypoint inside a function, so that `run` does not load it
    assert "mcp_operator.benchmark.shard" in graph.find_modules_directly_imported_by("mcp_operator.cli")


def test_the_graph_sees_importlib_and_package_face_imports(graph: grimp.ImportGraph) -> None:
    edges = module_graph(graph)
    # engines/__init__ re-exports engines.base, so importing the package loads it
    assert "mcp_bench.engines.base" in edges["mcp_bench.cli.parser"]
    # run_sync loads the optional uvloop by name
    assert importlib_imports("mcp_bench.engines.base") == {"uvloop"}


def test_no_import_cycles_in_our_packages(graph: grimp.ImportGraph) -> None:
    edges = module_graph(graph)
    assert {
        "mcp_bench.protocols.http",
        "mcp_devcluster.cluster",
        "mcp_operator.handlers.benchmark",
    } <= edges.keys()
    assert find_cycle(edges) is None
