"""LazyRegistry: built-in names import their module on first lookup; unknown and unavailable names
fail with the registry's own error type and a message that lists what is known."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from mcp_bench.engines.base import UnknownEngineError, get_engine
from mcp_bench.registry import LazyRegistry


class MissingThing(LookupError):
    pass


def _registry(known: dict[str, str]) -> LazyRegistry[str]:
    return LazyRegistry(known, MissingThing, kind="thing", missing="no thing")


def test_known_name_is_registered_by_importing_its_module_on_first_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = _registry({"late": "lazy_registry_plugin"})
    # The plugin registers itself on import, as engine and protocol modules do; it finds the
    # registry through a hook module.
    hook = types.ModuleType("lazy_registry_hook")
    hook.REG = reg  # type: ignore[attr-defined]
    hook.imports = 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lazy_registry_hook", hook)
    (tmp_path / "lazy_registry_plugin.py").write_text(
        "import lazy_registry_hook as h\nh.imports += 1\nh.REG.register('late', 'from the plugin')\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_registry_plugin", raising=False)

    assert "late" not in reg
    assert reg.registered() == [] and reg.known() == ["late"]
    assert reg.get("late") == "from the plugin"
    assert reg.get("late") == "from the plugin"
    assert hook.imports == 1
    assert "late" in reg and reg.registered() == ["late"]
    monkeypatch.delitem(sys.modules, "lazy_registry_plugin")


def test_known_name_whose_module_is_missing_is_unavailable() -> None:
    reg = _registry({"gone": "no_such_module_for_registry_test"})
    with pytest.raises(MissingThing, match=r"thing 'gone' is not available: No module named") as err:
        reg.get("gone")
    assert isinstance(err.value.__cause__, ModuleNotFoundError)


def test_unknown_name_lists_registered_and_built_in_names() -> None:
    reg = _registry({"b": "no_such_module_for_registry_test"})
    reg.register("a", "entry a")
    with pytest.raises(MissingThing, match=r"^no thing 'c' \(known: a, b\)$"):
        reg.get("c")


def test_registration_replaces_unless_told_not_to() -> None:
    reg = _registry({})
    reg.register("a", "first")
    reg.register("a", "second")
    assert reg.get("a") == "second"
    with pytest.raises(ValueError, match="thing 'a' is already registered"):
        reg.register("a", "third", replace=False)
    assert reg.get("a") == "second"
    reg.register("b", "new", replace=False)
    assert reg.registered() == ["a", "b"]


def test_engine_registry_names_every_built_in_engine() -> None:
    with pytest.raises(UnknownEngineError, match=r"^no engine 'nope' \(known: builtin, k6, locust"):
        get_engine("nope")
    assert get_engine("builtin").name == "builtin"
