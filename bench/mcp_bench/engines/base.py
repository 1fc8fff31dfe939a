"""The engine interface: anything that turns a :class:`RunPlan` into a :class:`ResultDocument`.

The built-in engine is the default; external engines (Locust, k6) register under their name and
must fill the same document, so reports, merging and the operator never care which one ran.
Observers let telemetry and server-metrics collectors run around each level without the engine
knowing about them.
"""

from __future__ import annotations

import asyncio
import importlib
import platform
import socket
import sys
from collections.abc import Callable, Coroutine, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol

from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.registry import LazyRegistry
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import EngineFingerprint, LevelResult, ResultDocument


class RunObserver:
    """Hooks around a run; override what you need. ``level_finished`` may fill
    ``result.telemetry`` and ``result.server_metrics`` (the document is built afterwards)."""

    async def run_started(self, plan: RunPlan) -> None:
        return None

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        return None

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        return None

    async def level_settled(self, plan: RunPlan, result: LevelResult) -> None:
        """After the level's settle wait (``observe.settle_s``, no load): read what it left behind."""
        return None

    async def run_finished(self, doc: ResultDocument) -> None:
        return None

    def progress(self, meta: LevelMeta, fraction: float, completed: int, failed: int) -> None:
        """Called a few times a second during a level (cheap: it runs on the load loop)."""
        return None


class Engine(Protocol):
    name: str

    async def run(self, plan: RunPlan, observers: Sequence[RunObserver] = ()) -> ResultDocument: ...


EngineFactory = Callable[[], Engine]


class UnknownEngineError(LookupError):
    pass


_ENGINES: LazyRegistry[EngineFactory] = LazyRegistry(
    {
        "builtin": "mcp_bench.engines.builtin",
        "locust": "mcp_bench.engines.locust",
        "k6": "mcp_bench.engines.k6",
    },
    UnknownEngineError,
    kind="engine",
    missing="no engine",
)


def register_engine(name: str, factory: EngineFactory) -> None:
    _ENGINES.register(name, factory)


def get_engine(name: str) -> Engine:
    return _ENGINES.get(name)()


def plan_feature_problem(plan: RunPlan) -> str | None:
    """Why the plan's engine cannot carry the plan out, without needing the engine's tool here
    (external engines name the field); None when it can."""
    engine = get_engine(plan.engine)
    check = getattr(engine, "check_features", None)
    if check is None:
        return None
    try:
        check(plan)
    except PlanError as exc:
        return str(exc)
    return None


def client_version() -> str:
    try:
        return version("mcp-operator")
    except PackageNotFoundError:
        return "0+unknown"


def fingerprint(engine: str, engine_version: str, server: dict[str, str]) -> EngineFingerprint:
    """Who measured (client, engine, Python, host) and what the server says it is."""
    return EngineFingerprint(
        engine=engine,
        engine_version=engine_version,
        client_name="mcp-bench",
        client_version=client_version(),
        server_name=server.get("server_name", ""),
        server_version=server.get("server_version", ""),
        python=f"{platform.python_implementation()} {sys.version.split()[0]}",
        hostname=socket.gethostname(),
    )


def run_sync(run: Coroutine[Any, Any, ResultDocument], *, use_uvloop: bool = True) -> ResultDocument:
    """Run a whole benchmark coroutine on a fresh loop (uvloop when installed and asked for)."""
    if use_uvloop:
        try:
            uvloop = importlib.import_module("uvloop")
        except ModuleNotFoundError:
            pass
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(run)
    return asyncio.run(run)
