"""An object as the board and the report show it: where it is, and its status read through its
API model (``MCPReadinessStatus``, ``MCPBenchmarkStatus``), tolerant of what it lacks
(``api.tolerant``), so any object the API returns is shown, also one an older operator wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from mcp_common.tolerant import held, status_in

from ..api.benchmark import MCPBenchmarkStatus
from ..api.readiness import MCPReadinessStatus

__all__ = ["Shown", "benchmark", "held", "readiness", "shown"]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Shown(Generic[M]):
    """An object as the board shows it: where it is, its spec's generation and its status."""

    kind: str
    namespace: str
    name: str
    generation: int | None
    status: M


def readiness(obj: Mapping[str, Any]) -> Shown[MCPReadinessStatus]:
    return shown(obj, MCPReadinessStatus)


def benchmark(obj: Mapping[str, Any]) -> Shown[MCPBenchmarkStatus]:
    return shown(obj, MCPBenchmarkStatus)


def shown(obj: Mapping[str, Any], model: type[M]) -> Shown[M]:
    """The object as ``kubectl get -o json`` returns it, its status through ``model``."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    generation = meta.get("generation")
    return Shown(
        kind=str(obj.get("kind") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        generation=generation if isinstance(generation, int) else None,
        status=status_in(obj, model),
    )
