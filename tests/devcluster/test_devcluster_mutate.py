"""``make mutate``'s runner: each module gets a stage mutmut can work in (its package under
``src/``, the tests linked, a configuration pytest and mutmut both read), and the killed share
is counted the way the docs report it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from mcp_devcluster.mutate import (
    ModuleRun,
    Tally,
    Target,
    load_pyproject,
    make_stage,
    report_line,
    stage_config,
    statuses,
    survivors,
    targets,
    to_toml,
)

PYPROJECT: dict[str, Any] = {
    "tool": {
        "mutmut": {"also_copy": ["tests"], "pytest_add_cli_args": ["-p", "no:cacheprovider"]},
        "mutate": {
            "modules": {
                "checks/mcp_checks/health.py": ["tests/checks/test_checks_health.py"],
                "bench/mcp_bench/x.py": {"tests": ["tests/bench/test_x.py"], "functions": ["f"]},
            }
        },
        "pytest": {
            "ini_options": {"asyncio_mode": "auto", "addopts": "--import-mode=importlib", "timeout": 600}
        },
    }
}


def test_a_target_names_its_package_module_and_staged_path() -> None:
    target = Target("operator/mcp_operator/readiness/drill/kpi.py", ("tests/x.py",))
    assert (target.package_root, target.package) == ("operator", "mcp_operator")
    assert target.module == "mcp_operator.readiness.drill.kpi"
    assert target.staged_path == "src/mcp_operator/readiness/drill/kpi.py"


def test_the_stage_configuration_is_the_shared_one_plus_the_modules() -> None:
    target, some = targets(PYPROJECT)
    assert some == Target("bench/mcp_bench/x.py", ("tests/bench/test_x.py",), ("f",))
    config = tomllib.loads(stage_config(PYPROJECT, target))
    assert config["tool"]["mutmut"] == {
        "pytest_add_cli_args": ["-p", "no:cacheprovider"],
        "source_paths": ["src"],
        "only_mutate": ["src/mcp_checks/health.py"],
        "pytest_add_cli_args_test_selection": ["tests/checks/test_checks_health.py"],
    }
    assert config["tool"]["pytest"]["ini_options"] == PYPROJECT["tool"]["pytest"]["ini_options"]


def test_toml_strings_survive_quotes_and_backslashes() -> None:
    text = to_toml({"t": {"a": 'say "hi" \\ bye', "b": [1, 2.5, True], "c": False}})
    assert tomllib.loads(text) == {"t": {"a": 'say "hi" \\ bye', "b": [1, 2.5, True], "c": False}}


def test_the_repositorys_modules_exist_and_their_tests_too() -> None:
    repo = Path(__file__).resolve().parents[2]
    listed = targets(load_pyproject(repo))
    assert listed, "no [tool.mutate.modules]"
    for target in listed:
        assert (repo / target.path).is_file(), target.path
        assert target.tests and all((repo / t).is_file() for t in target.tests), target


def test_a_stage_holds_the_package_the_tests_and_its_configuration(tmp_path: Path) -> None:
    (tmp_path / "checks" / "mcp_checks" / "__pycache__").mkdir(parents=True)
    (tmp_path / "checks" / "mcp_checks" / "health.py").write_text("X = 1\n")
    (tmp_path / "checks" / "mcp_checks" / "__pycache__" / "health.pyc").write_bytes(b"")
    (tmp_path / "tests").mkdir()
    target, _ = targets(PYPROJECT)
    stage = make_stage(tmp_path, PYPROJECT, target)
    assert stage == tmp_path / "mutants" / "mcp_checks.health"
    assert (stage / "src" / "mcp_checks" / "health.py").read_text() == "X = 1\n"
    assert not (stage / "src" / "mcp_checks" / "__pycache__").exists()
    assert (stage / "tests").resolve() == tmp_path / "tests"
    assert tomllib.loads((stage / "pyproject.toml").read_text())["tool"]["mutmut"]["source_paths"] == ["src"]
    (stage / "src" / "stale.py").write_text("")
    assert not (make_stage(tmp_path, PYPROJECT, target) / "src" / "stale.py").exists()  # always fresh


def test_the_share_counts_time_outs_as_caught_and_untested_mutants_as_not() -> None:
    tally = Tally.from_statuses(["killed"] * 80 + ["timeout"] * 5 + ["survived"] * 10 + ["no tests"] * 5)
    assert tally.caught == 85 and tally.share == 0.85 and tally.no_tests == 5
    assert Tally.from_statuses(["not checked"]).suspicious == 1
    assert Tally.from_statuses([]).share is None


def test_only_the_named_functions_mutants_are_counted(tmp_path: Path) -> None:
    target = Target("operator/mcp_operator/benchmark/status.py", ("t.py",), ("merged_status", "Run.decide"))
    assert target.mutant_patterns == [
        "mcp_operator.benchmark.status.x_merged_status__mutmut_*",
        "mcp_operator.benchmark.status.xǁRunǁdecide__mutmut_*",
    ]
    meta = tmp_path / "mutants" / (target.staged_path + ".meta")
    meta.parent.mkdir(parents=True)
    codes = {
        "mcp_operator.benchmark.status.x_merged_status__mutmut_1": 1,
        "mcp_operator.benchmark.status.x_merged_status__mutmut_2": 0,
        "mcp_operator.benchmark.status.xǁRunǁdecide__mutmut_1": 36,
        "mcp_operator.benchmark.status.x_level_row__mutmut_1": 0,  # formatting: not counted
    }
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    found = statuses(tmp_path, target)
    assert sorted(found.values()) == ["killed", "survived", "timeout"]
    assert survivors(found) == ["mcp_operator.benchmark.status.x_merged_status__mutmut_2: survived"]
    assert Target("checks/mcp_checks/health.py", ("t.py",)).mutant_patterns == ["mcp_checks.health.*"]


def test_a_report_line_gives_the_killed_share() -> None:
    target, _ = targets(PYPROJECT)
    tally = Tally(total=10, killed=9, timeout=0, survived=1, no_tests=0, skipped=0, suspicious=0)
    line = report_line(ModuleRun(target, tally, ("m: survived",), 12.0, Path("log")))
    assert line.startswith("mcp_checks.health") and "9/10" in line and "90.0%" in line
