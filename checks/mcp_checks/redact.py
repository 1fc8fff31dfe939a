"""Credentials out of what is shown: URLs with userinfo and secret-looking query parameters
replaced by ``REDACTED``, and free text (messages, events, logs) scrubbed of such URLs and of
bare ``path?token=...`` queries.

The one implementation, pure, so both the checks and the operator (which re-exports it from
``mcp_operator.redact``) apply the same rule to anything before it leaves the process.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

REDACTED = "REDACTED"

# query parameter names that carry credentials, compared lower-case
SENSITIVE_PARAMS = frozenset(
    {
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "auth",
        "authorization",
        "api_key",
        "apikey",
        "api-key",
        "key",
        "password",
        "passwd",
        "pwd",
        "secret",
        "client_secret",
        "signature",
        "sig",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
    }
)
SENSITIVE_SUFFIXES = ("_token", "-token", "_secret", "-secret", "_key", "-key", "password", "signature")
# a URL inside free text: scheme://, then anything up to whitespace or a quote/bracket
_URL_IN_TEXT = re.compile(r"""\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>()\[\]{}]+""")
# one query parameter inside free text, with or without a URL around it (urllib3 logs a retried
# request as its path and query only): its name after ? or &, its value up to a delimiter
_PARAM_IN_TEXT = re.compile(r"""(?<=[?&])([^\s=&#?'"<>()\[\]{}]+)=([^\s&#'"<>()\[\]{}]*)""")
# a percent escape: a name written with one (?%74oken=) is whatever the server decodes it to
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def sensitive_param(name: str) -> bool:
    """Whether a (decoded) query parameter's value is a credential, by name; false positives are fine."""
    lowered = name.lower()
    return lowered in SENSITIVE_PARAMS or lowered.endswith(SENSITIVE_SUFFIXES)


def hidden_param(raw_name: str) -> bool:
    """Whether a parameter name as written in a URL hides its value: a sensitive name, decoded, or
    any percent-encoded name at all (``%2574oken`` decodes to ``%74oken`` once and to ``token``
    twice; which one the server sees is not ours to guess)."""
    return bool(_ESCAPE.search(raw_name)) or sensitive_param(unquote_plus(raw_name))


def redact_query(query: str) -> str:
    """``query`` with the value of every hidden parameter replaced; every other byte as it was."""
    pieces = []
    for piece in query.split("&"):
        name, sep, _ = piece.partition("=")
        pieces.append(f"{name}={REDACTED}" if sep and hidden_param(name) else piece)
    return "&".join(pieces)


def url_has_credentials(url: str) -> bool:
    """True when the URL (or a path and query) carries userinfo or a hidden query parameter."""
    return redact_url(url) != url


def redact_url(url: str) -> str:
    """``url`` with userinfo and hidden query values replaced by ``REDACTED``; unchanged when
    there is nothing to hide. A URL without a scheme (``user:pw@host/x``) and a path with a query
    (``/health?token=x``) are handled too."""
    schemeless = "://" not in url
    parts = urlsplit(("//" + url) if schemeless else url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = redact_query(parts.query) if parts.query else parts.query
    if netloc == parts.netloc and query == parts.query:
        return url
    rebuilt = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    # the '//' added above comes back only before a host (a bare path and query has none)
    return rebuilt[2:] if schemeless and rebuilt.startswith("//") else rebuilt


def _redact_param(match: re.Match[str]) -> str:
    name = match.group(1)
    return f"{name}={REDACTED}" if hidden_param(name) else match.group(0)


def redact_text(text: str) -> str:
    """Every ``scheme://`` URL inside ``text`` redacted, and every hidden query parameter even
    where no scheme precedes it (``GET /api/v1/query?token=...``): for messages, events, logs."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)
    if "=" in text:
        text = _PARAM_IN_TEXT.sub(_redact_param, text)
    return text
