"""The config hash: sha256 over a canonical JSON form of the objects' content.

Content only (``data`` and ``binaryData``, never metadata), keys sorted, so the hash changes
exactly when what a pod would read changes. Canonical form, so a chart or pipeline can compute
the same value: ``json.dumps({"ConfigMap/<name>": {"data": {...}, "binaryData": {...}},
"Secret/<name>": {"data": {...}}}, sort_keys=True, separators=(",", ":"))`` encoded as UTF-8,
where ConfigMap ``data`` values are the strings and every other value is the base64 text the
API returns. A Secret's value goes into the digest and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX_LEN = 12


@dataclass(frozen=True)
class ConfigContent:
    """One ConfigMap's or Secret's content as the API returns it (Secret data base64)."""

    kind: str  # "ConfigMap" or "Secret"
    name: str
    data: Mapping[str, str]
    binary_data: Mapping[str, str]

    def __repr__(self) -> str:  # a Secret's values must never reach a log line through repr
        return f"ConfigContent({self.kind}/{self.name}, keys={sorted({*self.data, *self.binary_data})})"


def canonical(objects: list[ConfigContent]) -> bytes:
    doc: dict[str, dict[str, dict[str, str]]] = {}
    for obj in objects:
        key = f"{obj.kind}/{obj.name}"
        if key in doc:
            raise ValueError(f"{key} is named twice")
        entry: dict[str, dict[str, str]] = {"data": dict(obj.data)}
        if obj.binary_data:
            entry["binaryData"] = dict(obj.binary_data)
        doc[key] = entry
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def config_hash(objects: list[ConfigContent]) -> str:
    """Hex sha256 of the canonical form; the order of ``objects`` and of their keys is irrelevant."""
    return hashlib.sha256(canonical(objects)).hexdigest()


def normalise(annotation: str) -> str:
    """An annotation value as a bare lower-case hex digest (``sha256:`` prefixes are tolerated)."""
    value = annotation.strip().lower()
    return value.removeprefix("sha256:")


def short(digest: str) -> str:
    """The only form of a hash that reaches status, events and logs."""
    return normalise(digest)[:PREFIX_LEN]
