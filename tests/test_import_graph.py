"""No two modules of ours import each other, directly or round a longer loop, in any package.

Every import counts, also those inside functions and under ``TYPE_CHECKING`` (grimp, the graph
behind import-linter, reads them all): a cycle hidden in a function still ties the modules
together and makes the one imported first depend on load order. A package's ``__init__``
re-exporting its own modules is not a cycle and is left out.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("mcp_operator", "mcp_bench", "mcp_checks", "mcp_devcluster", "mcp_refserver")


def _is_ancestor(maybe_parent: str, module: str) -> bool:
    return module.startswith(maybe_parent + ".")


def module_graph(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Direct imports between modules, leaving out imports of a module's own ancestors."""
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if module.split(".", 1)[0] not in PACKAGES:
            continue
        edges[module] = {
            target
            for target in graph.find_modules_directly_imported_by(module)
            if target.split(".", 1)[0] in PACKAGES
            and not _is_ancestor(target, module)
            and not _is_ancestor(module, target)
        }
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


def test_no_import_cycles_in_our_packages(graph: grimp.ImportGraph) -> None:
    edges = module_graph(graph)
    assert {
        "mcp_bench.protocols.http",
        "mcp_devcluster.cluster",
        "mcp_operator.handlers.benchmark",
    } <= edges.keys()
    assert find_cycle(edges) is None
