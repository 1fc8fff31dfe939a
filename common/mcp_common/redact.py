"""Credentials out of what is shown, known by position, not by name: a URL's userinfo, every
query value, every matrix parameter's value (``/a;jsessionid=...``) and its fragment are replaced
by ``REDACTED`` wherever the URL is copied (a signed URL's signature, a session id, an OAuth
token in ``#access_token=`` carry names no list foresees). Free text (messages, events, logs) is
scrubbed of such URLs and of every ``?name=value`` / ``&name=value`` even where no scheme
precedes it (``path?token=...``).

What a spec may carry is judged by name (``url_has_credentials``, the rule the CRDs' CEL rules
apply too): userinfo, a secret-looking parameter name, or any percent-encoded one is refused,
while ``?model=llama`` is a URL like any other (and is shown as ``?model=REDACTED``).

The one implementation, pure, so both the checks and the operator (which re-exports it from
``mcp_operator.redact``) apply the same rule to anything before it leaves the process.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

REDACTED = "REDACTED"

# What a parameter name that carries a credential looks like, in three parts that every caller
# shares, the CEL rules of the CRDs included (RE2 and Python alike, no backslash or quote):
# - a word anywhere in the name, whatever its case (accessToken, apiToken, token[], x-jwt-assertion);
SECRET_WORDS = (
    "token",
    "secret",
    "authoriz",
    "passw",
    "jwt",
    "credential",
    "session",
    "bearer",
    "signature",
    "apikey",
    "cookie",
)
# - a short word standing alone, delimited by a non-letter or the name's ends (key, api_key, X-Sig,
#   SID) but not inside a longer word (keyboard, monkey, design);
SHORT_WORDS = ("key", "sig", "pwd", "pass", "auth", "sid", "otp")
# - the same short word as a camelCase part (accessKey, xSig).
_CAMEL = "|".join(w[0].upper() + w[1:] + "|" + w.upper() for w in SHORT_WORDS)
# a name (of a query or matrix parameter) between a [?&;] that opens it and the '=' that ends it
_NAME_CHAR = "[^=&#;]"
_BOUNDARY = "[^A-Za-z=&#;]"
SECRET_NAME = (
    f"[?&;]{_NAME_CHAR}*(?i:{'|'.join(SECRET_WORDS)}){_NAME_CHAR}*="
    f"|[?&;]({_NAME_CHAR}*{_BOUNDARY})?(?i:{'|'.join(SHORT_WORDS)})({_BOUNDARY}{_NAME_CHAR}*)?="
    f"|[?&;]{_NAME_CHAR}*[a-z]({_CAMEL})({_BOUNDARY}{_NAME_CHAR}*)?="
)
_SECRET_NAME = re.compile(SECRET_NAME)
# a URL inside free text: scheme://, then anything up to whitespace or a quote/bracket, except
# the brackets of an IPv6 host (after any userinfo)
_URL_IN_TEXT = re.compile(
    r"""\b[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s'"<>()\[\]{}/?#]*@)?(?:\[[^\s'"<>()\[\]{}/?#]*\])?"""
    r"""[^\s'"<>()\[\]{}]*"""
)
# one query parameter inside free text, with or without a URL around it (urllib3 logs a retried
# request as its path and query only): its name after ? or &, its value up to a delimiter
_PARAM_IN_TEXT = re.compile(r"""(?<=[?&])([^\s=&#?'"<>(){}]+)=([^\s&#'"<>()\[\]{}]*)""")
# matrix parameters inside free text: a path segment's ';name=value' pieces (/app;jsessionid=...)
_MATRIX_IN_TEXT = re.compile(r"""(?<=;)([^\s=;/?#&'"<>(){}\[\]]+)=([^\s;/?#&'"<>()\[\]{}]*)""")
_PATH_WITH_MATRIX = re.compile(r"""/[^\s;/?#'"<>(){}\[\]]*(?:;[^\s/?#'"<>(){}\[\]]*)+""")
# a credential header's value inside free text, a log of a request's headers, say
# ("Authorization: Bearer ...", "'x-api-key': '...'"): the value, and its scheme word kept
_HEADER_IN_TEXT = re.compile(
    r"""(?i)\b((?:proxy-)?authorization|(?:set-)?cookie|x-api-key|api-key|x-auth-token)(["']?\s*[:=]\s*["']?)"""
    r"""(?:(bearer|basic|digest|token|negotiate)\s+)?[^\s"',;}]+"""
)
# a bearer token on its own (an error that quotes it without the header's name)
_BEARER_IN_TEXT = re.compile(r"(?i)\b(bearer)\s+(?!REDACTED\b)[A-Za-z0-9._~+/=-]+")
# a URL's own scheme, at its start (a '://' later, in a query value, makes no scheme)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# a percent escape: a name written with one (?%74oken=) is whatever the server decodes it to
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def sensitive_param(name: str) -> bool:
    """Whether a (decoded) query or matrix parameter's name marks a credential, which a spec's URL
    must not carry (``url_has_credentials``), by the words of ``SECRET_NAME``; false positives are
    fine."""
    return bool(_SECRET_NAME.fullmatch(f"?{name}="))


def hidden_param(raw_name: str) -> bool:
    """Whether a parameter name as written in a URL marks a credential: a sensitive name, decoded, or
    any percent-encoded name at all (``%2574oken`` decodes to ``%74oken`` once and to ``token``
    twice; which one the server sees is not ours to guess)."""
    return bool(_ESCAPE.search(raw_name)) or sensitive_param(unquote_plus(raw_name))


def _redact_value(piece: str) -> str:
    """One ``name=value`` piece with its value hidden; a piece without ``=`` is all value."""
    if not piece:
        return piece
    name, sep, _ = piece.partition("=")
    return f"{name}={REDACTED}" if sep else REDACTED


def redact_query(query: str) -> str:
    """``query`` with every parameter's value replaced; the names and separators as they were."""
    return "&".join(_redact_value(piece) for piece in query.split("&"))


def redact_path(path: str) -> str:
    """``path`` with every matrix parameter's value replaced (``/a;v=1/b`` -> ``/a;v=REDACTED/b``);
    the segments themselves as they were."""
    if ";" not in path:
        return path
    segments = []
    for segment in path.split("/"):
        base, sep, params = segment.partition(";")
        segments.append(base + "".join(";" + _redact_value(p) for p in params.split(";")) if sep else segment)
    return "/".join(segments)


def _query_names(query: str) -> list[str]:
    return [name for name, sep, _ in (piece.partition("=") for piece in query.split("&")) if sep]


def url_has_credentials(url: str) -> bool:
    """True when the URL (or a path and query) carries userinfo, a fragment (never sent to a
    server, so only a token such as ``#access_token=`` has a reason to be there) or a query or
    matrix parameter whose name hides its value (``hidden_param``): what a spec's URL field must
    not carry."""
    try:
        parts = urlsplit(url if _SCHEME.match(url) else "//" + url)
    except ValueError:
        return False  # no URL a client could dial; the field's own validation refuses it
    return (
        "@" in parts.netloc
        or "#" in url
        or any(hidden_param(name) for name in _query_names(parts.query))
        or bool(_SECRET_NAME.search(parts.path))  # a matrix parameter, read as the CRDs' rule reads it
    )


def redact_url(url: str) -> str:
    """``url`` with its userinfo, query values, matrix parameter values and fragment replaced by
    ``REDACTED``; scheme, host, port and path kept, and the URL unchanged when there is nothing
    to hide. A URL without a scheme (``user:pw@host/x``) and a path with a query
    (``/health?token=x``) are handled too; what does not parse as a URL is hidden whole."""
    schemeless = not _SCHEME.match(url)
    try:
        parts = urlsplit(("//" + url) if schemeless else url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    path = redact_path(parts.path)
    query = redact_query(parts.query)
    fragment = REDACTED if parts.fragment else ""
    if (netloc, path, query, fragment) == (parts.netloc, parts.path, parts.query, parts.fragment):
        return url
    rebuilt = urlunsplit((parts.scheme, netloc, path, query, fragment))
    # the '//' added above comes back only before a host (a bare path and query has none)
    return rebuilt[2:] if schemeless and rebuilt.startswith("//") else rebuilt


def _redact_param(match: re.Match[str]) -> str:
    return f"{match.group(1)}={REDACTED}"


def redact_text(text: str) -> str:
    """Every ``scheme://`` URL inside ``text`` redacted, and every query and matrix parameter's
    value even where no scheme precedes it (``GET /api/v1/query?token=...``), and a credential
    header's value (``Authorization: Bearer ...``): for messages, events, logs."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)
    if "=" in text:
        text = _PARAM_IN_TEXT.sub(_redact_param, text)
        if ";" in text:
            text = _PATH_WITH_MATRIX.sub(_redact_matrix, text)
    text = _HEADER_IN_TEXT.sub(_redact_header, text)
    return _BEARER_IN_TEXT.sub(lambda match: f"{match.group(1)} {REDACTED}", text)


def _redact_matrix(match: re.Match[str]) -> str:
    return _MATRIX_IN_TEXT.sub(_redact_param, match.group(0))


def _redact_header(match: re.Match[str]) -> str:
    scheme = f"{match.group(3)} " if match.group(3) else ""
    return f"{match.group(1)}{match.group(2)}{scheme}{REDACTED}"
