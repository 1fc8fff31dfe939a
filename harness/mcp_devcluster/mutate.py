"""``make mutate``: mutation testing (mutmut 3) over the modules that decide verdicts.

A test suite that passes on a broken verdict proves nothing, so each listed module is mutated
(an operator flipped, a constant changed, a branch removed) and its unit tests must fail on
every mutant; the killed share is printed per module, and the run fails below ``--min-share``.

mutmut names a mutant by its file's path (``src/`` stripped) and puts the mutated copy first on
``sys.path`` from ``mutants/`` or ``mutants/src``. This repository keeps its packages under
``bench/``, ``checks/`` and ``operator/``, so each module runs in a stage of its own,
``mutants/<module>/``: the module's package under ``src/``, the ``also_copy`` paths (the tests)
linked in, and a ``pyproject.toml`` made of the repository's ``[tool.mutmut]`` (what every run
shares), this module's ``only_mutate`` and tests (``[tool.mutate.modules]``), and the
repository's pytest settings. Only the tests listed for a module run against its mutants, so a
run takes minutes on two busy cores, not hours. A module that also formats status may name the
functions that decide its verdict (``functions``): only their mutants are run and counted.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STAGES = "mutants"  # under the repository; git ignores it
MIN_SHARE = 0.9
# what mutmut 3.8's exit code of a mutant's test run means (mutmut.stats.status_by_exit_code);
# any other code is "suspicious"
STATUS_BY_EXIT: dict[int | None, str] = {
    1: "killed",
    3: "killed",  # an internal error of pytest's
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    24: "timeout",  # SIGXCPU: the CPU-time limit
    -24: "timeout",
    152: "timeout",
    255: "timeout",
    37: "caught by type check",
    2: "interrupted",
    -11: "segfault",
    -9: "segfault",
    None: "not checked",
}
# the statuses that mean the tests caught the mutant (a time-out: the mutant hung them)
CAUGHT = ("killed", "timeout")


def _mangled(function: str) -> str:
    """mutmut's name for a function (``x_f``) or a method (``xǁClassǁm``)."""
    owner, _, name = function.rpartition(".")
    return f"xǁ{owner}ǁ{name}" if owner else f"x_{name}"


@dataclass(frozen=True)
class Target:
    """One module to mutate (``checks/mcp_checks/health.py``), the test files that judge it, and
    where only some of its functions decide a verdict, their names (``f``, ``Class.method``)."""

    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()

    @property
    def mutant_patterns(self) -> list[str]:
        """mutmut's names of this module's mutants to run and count (all when no function is named)."""
        if not self.functions:
            return [f"{self.module}.*"]
        return [f"{self.module}.{_mangled(f)}__mutmut_*" for f in self.functions]

    @property
    def package_root(self) -> str:
        """The folder the import package lives in (``checks``)."""
        return self.path.split("/", 1)[0]

    @property
    def package(self) -> str:
        """The top-level import package (``mcp_checks``)."""
        return self.path.split("/")[1]

    @property
    def module(self) -> str:
        """The dotted module name (``mcp_checks.health``): the stage's name and mutmut's prefix."""
        return self.path.split("/", 1)[1].removesuffix(".py").replace("/", ".")

    @property
    def staged_path(self) -> str:
        """Where the module sits in its stage (``src/mcp_checks/health.py``)."""
        return "src/" + self.path.split("/", 1)[1]


@dataclass(frozen=True)
class Tally:
    """What mutmut's ``export-cicd-stats`` counted for one module."""

    total: int
    killed: int
    timeout: int
    survived: int
    no_tests: int
    skipped: int
    suspicious: int

    @classmethod
    def from_statuses(cls, statuses: Sequence[str]) -> Tally:
        count = statuses.count
        known = ("killed", "timeout", "survived", "no tests", "skipped")
        return cls(
            total=len(statuses),
            killed=count("killed"),
            timeout=count("timeout"),
            survived=count("survived"),
            no_tests=count("no tests"),
            skipped=count("skipped"),
            suspicious=sum(1 for s in statuses if s not in known),
        )

    @property
    def caught(self) -> int:
        return self.killed + self.timeout

    @property
    def share(self) -> float | None:
        """Caught over all mutants tried (a mutant no test reached counts as a survivor); None
        when there were none."""
        tried = self.total - self.skipped
        return None if tried <= 0 else self.caught / tried


def load_pyproject(repo: Path = REPO) -> dict[str, Any]:
    return tomllib.loads((repo / "pyproject.toml").read_text())


def targets(pyproject: Mapping[str, Any]) -> list[Target]:
    """The modules of ``[tool.mutate.modules]``, in file order: ``path = [tests]``, or a table
    ``{tests = [...], functions = [...]}``."""
    modules = pyproject.get("tool", {}).get("mutate", {}).get("modules", {})
    return [
        Target(path, tuple(entry))
        if isinstance(entry, list)
        else Target(path, tuple(entry["tests"]), tuple(entry.get("functions", ())))
        for path, entry in modules.items()
    ]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def to_toml(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """Flat tables of scalars and lists as TOML (all a stage's configuration needs)."""
    lines: list[str] = []
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{json.dumps(key)} = {_toml_value(value)}" for key, value in table.items()]
        lines.append("")
    return "\n".join(lines)


def stage_config(pyproject: Mapping[str, Any], target: Target) -> str:
    """The stage's ``pyproject.toml``: the shared ``[tool.mutmut]`` plus this module's source,
    ``only_mutate`` and tests, and the repository's pytest settings (mutmut runs pytest from
    the stage's ``mutants/``, whose copy of this file is pytest's configuration)."""
    tool = pyproject.get("tool", {})
    mutmut = {k: v for k, v in tool.get("mutmut", {}).items() if k != "also_copy"}
    mutmut |= {
        "source_paths": ["src"],
        "only_mutate": [target.staged_path],
        "pytest_add_cli_args_test_selection": list(target.tests),
    }
    return to_toml(
        {"tool.mutmut": mutmut, "tool.pytest.ini_options": tool.get("pytest", {}).get("ini_options", {})}
    )


def make_stage(repo: Path, pyproject: Mapping[str, Any], target: Target) -> Path:
    """A fresh ``mutants/<module>/`` for one run (a rerun never reuses an earlier one's results)."""
    stage = repo / STAGES / target.module
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "src").mkdir(parents=True)
    shutil.copytree(
        repo / target.package_root / target.package,
        stage / "src" / target.package,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for linked in pyproject.get("tool", {}).get("mutmut", {}).get("also_copy", []):
        (stage / linked.rstrip("/")).symlink_to(repo / linked.rstrip("/"))
    (stage / "pyproject.toml").write_text(stage_config(pyproject, target))
    return stage


def _mutmut(stage: Path, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    if log is None:
        return subprocess.run(command, cwd=stage, capture_output=True, text=True, check=False)
    with log.open("w") as out:
        return subprocess.run(
            command, cwd=stage, stdout=out, stderr=subprocess.STDOUT, text=True, check=False
        )


def diff_lines(stage: Path, mutant: str) -> list[str]:
    """The lines a mutant changed (``-`` before, ``+`` after), from ``mutmut show``."""
    shown = _mutmut(stage, "show", mutant).stdout.splitlines()
    return [line for line in shown if line[:1] in "-+" and not line.startswith(("---", "+++"))]


def statuses(stage: Path, target: Target) -> dict[str, str]:
    """Each counted mutant's status, from the results mutmut keeps beside the mutated file."""
    meta = stage / "mutants" / (target.staged_path + ".meta")
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    return {
        name: STATUS_BY_EXIT.get(code, "suspicious")
        for name, code in sorted(codes.items())
        if any(fnmatch.fnmatchcase(name, p) for p in target.mutant_patterns)
    }


def survivors(found: Mapping[str, str]) -> list[str]:
    """The mutants not caught, as ``name: status`` lines."""
    return [f"{name}: {status}" for name, status in found.items() if status not in CAUGHT]


@dataclass(frozen=True)
class ModuleRun:
    target: Target
    tally: Tally | None  # None: mutmut itself failed (its log says why)
    survivors: tuple[str, ...]
    seconds: float
    log: Path


def run_target(repo: Path, pyproject: Mapping[str, Any], target: Target, max_children: int) -> ModuleRun:
    started = time.monotonic()
    stage = make_stage(repo, pyproject, target)
    log = stage / "mutmut.log"
    only = target.mutant_patterns if target.functions else []
    ran = _mutmut(stage, "run", "--max-children", str(max_children), *only, log=log)
    tally: Tally | None = None
    left: list[str] = []
    if ran.returncode == 0:
        found = statuses(stage, target)
        tally, left = Tally.from_statuses(list(found.values())), survivors(found)
    return ModuleRun(target, tally, tuple(left), time.monotonic() - started, log)


def report_line(run: ModuleRun) -> str:
    if run.tally is None or run.tally.share is None:
        why = "mutmut failed" if run.tally is None else "no mutants"
        return f"{run.target.module:<44} {why} (see {run.log})"
    tally = run.tally
    return (
        f"{run.target.module:<44} {tally.caught:>4}/{tally.total - tally.skipped:<4} killed "
        f"{tally.share:7.1%}  ({tally.survived} survived, {tally.no_tests} untested, "
        f"{tally.timeout} timed out) in {run.seconds:.0f}s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_devcluster.mutate", description=(__doc__ or "").partition("\n")[0] or None
    )
    parser.add_argument("modules", nargs="*", help="only modules whose path contains one of these")
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--min-share", type=float, default=MIN_SHARE, help="fail below this killed share")
    parser.add_argument("--diff", action="store_true", help="show what each surviving mutant changed")
    args = parser.parse_args(argv)
    pyproject = load_pyproject(REPO)
    chosen = [t for t in targets(pyproject) if not args.modules or any(m in t.path for m in args.modules)]
    if not chosen:
        print("no module of [tool.mutate.modules] matches", file=sys.stderr)
        return 2
    started, runs = time.monotonic(), []
    for target in chosen:
        run = run_target(REPO, pyproject, target, args.max_children)
        runs.append(run)
        print(report_line(run), flush=True)
        for line in run.survivors:
            print(f"    {line}", flush=True)
            if args.diff:
                stage = REPO / STAGES / target.module
                for changed in diff_lines(stage, line.rsplit(": ", 1)[0]):
                    print(f"        {changed}", flush=True)
    print(f"mutate: {len(runs)} module(s) in {time.monotonic() - started:.0f}s")
    low = [r for r in runs if r.tally is None or r.tally.share is None or r.tally.share < args.min_share]
    if low:
        print(f"below {args.min_share:.0%}: {', '.join(r.target.module for r in low)}")
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
