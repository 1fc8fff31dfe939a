"""Child objects of our resources: deterministic names that always fit, and owner references.

Names are derived, never random, so a retried create answers 409 instead of making a
duplicate; a name that must be cut keeps a digest of the whole, so two long names that share
a prefix still differ.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .api.common import API_VERSION

MAX_LABEL_VALUE = 63
MAX_DNS_LABEL = 63
MAX_OBJECT_NAME = 253
_NOT_IN_LABEL = re.compile(r"[^a-z0-9-]")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def bounded_name(name: str, limit: int, suffix: str = "") -> str:
    """``name + suffix`` within ``limit`` characters, cut with a digest when it does not fit."""
    if len(name) + len(suffix) <= limit:
        return name + suffix
    return f"{name[: limit - len(suffix) - 9]}-{_digest(name)}{suffix}"


def dns_label(name: str, limit: int, suffix: str = "") -> str:
    """``name + suffix`` as a DNS-1123 label of at most ``limit`` characters (for names that
    become hostnames): what a label cannot hold (the dots a resource name may have) becomes
    ``-``, and a changed or cut name keeps a digest of the original so that it stays unique."""
    safe = _NOT_IN_LABEL.sub("-", name.lower())
    if safe == name and len(name) + len(suffix) <= limit:
        return name + suffix
    head = safe[: limit - len(suffix) - 9].strip("-")
    return f"{head}-{_digest(name)}{suffix}" if head else f"{_digest(name)}{suffix}"


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
