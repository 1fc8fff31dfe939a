"""Protocol clients by backend name.

Each backend module registers a factory on import (``register_protocol("openai", factory)``); the
engine looks backends up by the plan's ``backend`` and imports the known modules on first use, so
an unused protocol's dependencies are never imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcp_bench.records import ProtocolClient

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

# A factory builds one client for a run; ``max_connections`` sizes its connection pool.
ProtocolFactory = Callable[["RunPlan", int], ProtocolClient]

_REGISTRY: dict[str, ProtocolFactory] = {}
_KNOWN_MODULES: dict[str, str] = {
    "http": "mcp_bench.protocols.http",
    "openai": "mcp_bench.protocols.openai",
    "openai-chat": "mcp_bench.protocols.openai",
    "triton-http": "mcp_bench.protocols.triton",
    "triton-grpc": "mcp_bench.protocols.triton",
    "mix": "mcp_bench.protocols.mix",
}


class UnknownBackendError(LookupError):
    """No protocol client is registered for a backend name."""


def register_protocol(backend: str, factory: ProtocolFactory, *, replace: bool = True) -> None:
    """Make ``backend`` usable in plans; a later registration replaces an earlier one by default."""
    if not replace and backend in _REGISTRY:
        raise ValueError(f"protocol {backend!r} is already registered")
    _REGISTRY[backend] = factory


def protocol_factory(backend: str) -> ProtocolFactory:
    """The factory for ``backend``, importing its module first when it is one of ours."""
    if backend not in _REGISTRY and backend in _KNOWN_MODULES:
        try:
            importlib.import_module(_KNOWN_MODULES[backend])
        except ModuleNotFoundError as exc:
            raise UnknownBackendError(f"backend {backend!r} is not available: {exc}") from exc
    try:
        return _REGISTRY[backend]
    except KeyError:
        known = ", ".join(sorted(set(_REGISTRY) | set(_KNOWN_MODULES)))
        raise UnknownBackendError(f"no protocol client for backend {backend!r} (known: {known})") from None


def registered_backends() -> list[str]:
    return sorted(_REGISTRY)


__all__ = [
    "ProtocolFactory",
    "UnknownBackendError",
    "protocol_factory",
    "register_protocol",
    "registered_backends",
]
