"""Child objects of our resources: deterministic names that always fit, and owner references.

Names are derived, never random, so a retried create answers 409 instead of making a
duplicate; a name that must be cut keeps a digest of the whole, so two long names that share
a prefix still differ.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .api.common import API_VERSION

MAX_LABEL_VALUE = 63
MAX_OBJECT_NAME = 253


def bounded_name(name: str, limit: int, suffix: str = "") -> str:
    """``name + suffix`` within ``limit`` characters, cut with a digest when it does not fit."""
    if len(name) + len(suffix) <= limit:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - len(suffix) - len(digest) - 1]}-{digest}{suffix}"


def owner_reference(kind: str, name: str, uid: str, *, controller: bool = True) -> dict[str, Any]:
    """Owner reference to one of our resources; garbage collection deletes the child with it."""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }
