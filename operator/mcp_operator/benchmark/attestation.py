"""A shard's attestation of the result it wrote, through its own log.

The HMAC proves a result was signed with the run's key, but anyone who may read the key's
Secret can sign. Only code running in the shard's container can write that container's stdout,
and the operator reads it back from the kubelet (``pods/log``, proxied by the API server), so
the shard prints the SHA-256 of exactly the document it stored and the collector accepts a
result only when the last such line of the writer pod's log names the stored document.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

ATTESTATION_PREFIX = "mcp-shard-result sha256="
# the collector reads this many lines from the end of the log: the shard prints its attestation
# after publishing and only its one-line termination message after that
ATTESTATION_TAIL_LINES = 200
_LINE = re.compile(rf"^{re.escape(ATTESTATION_PREFIX)}(?P<digest>[0-9a-f]{{64}})$")


def document_digest(text: str) -> str:
    """SHA-256 (hex) of the document's bytes as stored (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def attestation_line(text: str) -> str:
    """The line a shard prints for the document ``text`` it has stored."""
    return f"{ATTESTATION_PREFIX}{document_digest(text)}"


def attested_digest(log: str) -> str | None:
    """The digest of the last whole attestation line in ``log``, or None when there is none (a
    line counts only as a whole: text that merely contains the prefix does not)."""
    for line in reversed(log.splitlines()):
        match = _LINE.match(line.rstrip("\r"))
        if match:
            return match["digest"]
    return None


@dataclass(frozen=True)
class PodLog:
    """The tail of the writer pod's log, or why it could not be read (``text`` None then)."""

    text: str | None
    unreadable: str = ""


def attestation_problem(log: PodLog | None, document_text: str) -> str | None:
    """Why the pod's log does not attest ``document_text``, or None when it does."""
    if log is None or log.text is None:
        why = log.unreadable if log is not None else "it was not read"
        return f"not attested: the pod's log cannot be read ({why})"
    digest = attested_digest(log.text)
    if digest is None:
        return "not attested by the pod's log"
    if digest != document_digest(document_text):
        return "the pod's log attests another document"
    return None
