"""A port in a URL field is 1-65535, refused otherwise at apply time by a CEL rule every URL field
carries (beside ``api.credentials``'): ``http://host:99999`` passed the schema before, and every
parser the operator hands it to (``urllib.parse``'s ``port``) raised instead of answering.

The regex is RE2 and Python alike, with no backslash or quote (it sits inside a single-quoted
CEL string literal). It reads the authority after an optional ``scheme://`` (also after a
``name=`` prefix, as in serverMetrics' ``vllm=http://host:port``) or, without a scheme, from the
start (CSDS sources are ``host:port``); a bracketed IPv6 host's colons are never a port.
"""

from __future__ import annotations

from pydantic import JsonValue

from .common import cel

# 0, or above 65535, with any leading zeros (Python's parser reads 080 as 80)
OUT_OF_RANGE = "0*(0|[1-9][0-9]{5,}|[7-9][0-9]{4}|6[6-9][0-9]{3}|65[6-9][0-9]{2}|655[4-9][0-9]|6553[6-9])"
BAD_PORT = f"^([^/?#]*://)?[^/?#]*:{OUT_OF_RANGE}([/?#]|$)"
PORT_HINT = "port must be between 1 and 65535 (PortOutOfRange)"

__all__ = ["BAD_PORT", "PORT_HINT", "port_in_range"]


def port_in_range(name: str) -> list[dict[str, JsonValue]]:
    """The CEL rule for a URL field's port; ``name`` starts its message, so it names the field."""
    return [cel(f"!self.matches('{BAD_PORT}')", f"{name} {PORT_HINT}")]
