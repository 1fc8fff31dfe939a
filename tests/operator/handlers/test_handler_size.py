"""Handlers stay thin (docs/design.md): they parse, call the resource package and write status.
Read from the source with ``ast`` so the figures cannot creep back up: every handler module
under 200 lines, every function kopf registers (decorated with ``@kopf.*``) under 30 lines from
its ``def`` to its last line, no import of kopf's private modules anywhere in the operator, and
the handler ids kopf records in each object's progress annotations unchanged."""

from __future__ import annotations

import ast
from pathlib import Path

import kopf

import mcp_operator
from mcp_operator import handlers

OPERATOR = Path(mcp_operator.__file__).parent
HANDLERS = OPERATOR / "handlers"
MAX_MODULE_LINES = 200
MAX_HANDLER_LINES = 30
# ids in the progress annotations of existing objects: a renamed handler would run again
RESOURCE_HANDLER_IDS = {
    "start_benchmark",
    "start_benchmark/spec",
    "evaluate_readiness",
    "evaluate_readiness/spec",
    "revert_on_delete",
    "collect_benchmark",
    "forget_deleted_gate",
    "track_readiness",  # the MCPReadiness ticks (handlers.periodic) are no kopf handlers
}


def _is_kopf(decorator: ast.expr) -> bool:
    """``@kopf.on.create(...)``, ``@kopf.timer(...)``, ``@kopf.on.cleanup()``: rooted at ``kopf``."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "kopf"


def kopf_handlers(path: Path) -> dict[str, int]:
    """Each function of the module kopf registers, and its length in lines (decorators not
    counted: from ``def`` to the last line of its body)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(map(_is_kopf, node.decorator_list))
    }


def private_kopf_imports(path: Path) -> list[str]:
    """``import kopf._x``, ``from kopf._x import y``, and a ``"kopf._x"`` string (importlib)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("kopf._")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kopf._"):
            found.append(str(node.module))
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("kopf._")
        ):
            found.append(node.value)
    return found


def test_every_handler_module_is_short() -> None:
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in HANDLERS.glob("*.py")}
    assert {"readiness.py", "benchmark.py", "startup.py"} <= lengths.keys()
    assert {name: n for name, n in lengths.items() if n >= MAX_MODULE_LINES} == {}


def test_every_kopf_handler_is_short() -> None:
    found = {
        f"{p.stem}.{name}": n for p in sorted(HANDLERS.glob("*.py")) for name, n in kopf_handlers(p).items()
    }
    assert {"readiness.evaluate_readiness", "benchmark.start_benchmark", "startup.configure"} <= found.keys()
    assert {name: n for name, n in found.items() if n >= MAX_HANDLER_LINES} == {}


def test_no_kopf_private_import_in_the_operator() -> None:
    found = {str(p.relative_to(OPERATOR)): private_kopf_imports(p) for p in OPERATOR.rglob("*.py")}
    assert {path: names for path, names in found.items() if names} == {}


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import importlib\nimport kopf\nfrom kopf._core import x\n"
        "@kopf.timer('g', 'v', 'p', interval=1)\n@other\nasync def tick():\n    return 1\n\n"
        "def plain():\n    importlib.import_module('kopf._cogs')\n",
        encoding="utf-8",
    )
    assert kopf_handlers(sample) == {"tick": 2}
    assert private_kopf_imports(sample) == ["kopf._core", "kopf._cogs"]


def test_the_handler_ids_are_those_existing_objects_recorded() -> None:
    assert "readiness" in handlers.__all__  # importing the package registered every handler
    registry = kopf.get_default_registry()
    ids = {
        h.id
        for group in (registry._changing, registry._spawning, registry._watching)
        for h in group.get_all_handlers()
    }
    assert ids == RESOURCE_HANDLER_IDS
