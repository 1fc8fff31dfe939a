"""Name -> factory lookups whose built-in entries are imported on first use.

Engines and protocol clients are both looked up by the name a plan gives. Each implementation
module registers itself on import; the registry knows which module provides each built-in name
and imports it only when that name is asked for, so an unused engine's or protocol's
dependencies (Locust, tritonclient, ...) are never imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyRegistry(Generic[T]):
    """Registered entries by name, plus the modules that register the built-in names.

    ``kind`` names an entry in "not available" errors (``engine 'k6' is not available: ...``);
    ``missing`` starts the error for an unknown name (``no engine 'x' (known: ...)``). Both are
    raised as ``error``, so callers can catch one exception type per registry.
    """

    def __init__(
        self,
        known_modules: Mapping[str, str],
        error: type[LookupError],
        *,
        kind: str,
        missing: str,
    ) -> None:
        self._entries: dict[str, T] = {}
        self._known_modules = dict(known_modules)
        self._error = error
        self._kind = kind
        self._missing = missing

    def register(self, name: str, entry: T, *, replace: bool = True) -> None:
        """Make ``name`` usable; a later registration replaces an earlier one unless ``replace`` is off."""
        if not replace and name in self._entries:
            raise ValueError(f"{self._kind} {name!r} is already registered")
        self._entries[name] = entry

    def get(self, name: str) -> T:
        """The entry for ``name``, importing its module first when it is a built-in name."""
        if name not in self._entries and name in self._known_modules:
            try:
                importlib.import_module(self._known_modules[name])
            except ModuleNotFoundError as exc:
                raise self._error(f"{self._kind} {name!r} is not available: {exc}") from exc
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self.known())
            raise self._error(f"{self._missing} {name!r} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def registered(self) -> list[str]:
        """Names registered so far (built-in names appear once their module is imported)."""
        return sorted(self._entries)

    def known(self) -> list[str]:
        """Every name a lookup may succeed for: registered ones and the built-in ones."""
        return sorted(set(self._entries) | set(self._known_modules))
