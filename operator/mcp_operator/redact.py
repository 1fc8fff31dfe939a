"""Credentials out of what the operator writes: URLs shown with userinfo and secret-looking query
parameters replaced by ``REDACTED``, and free text (messages, events, logs) scrubbed of such URLs.

Shared by both resources; pure, so it can be applied to anything before it leaves the process.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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


def sensitive_param(name: str) -> bool:
    """Whether a query parameter's value is a credential (by name; false positives are fine)."""
    lowered = name.lower()
    return lowered in SENSITIVE_PARAMS or lowered.endswith(SENSITIVE_SUFFIXES)


def url_has_credentials(url: str) -> bool:
    """True when the URL carries userinfo or a sensitive query parameter."""
    return redact_url(url) != url


def redact_url(url: str) -> str:
    """``url`` with userinfo and sensitive query values replaced by ``REDACTED``; unchanged when
    there is nothing to hide. A URL without a scheme (``user:pw@host/x``) is handled too."""
    schemeless = "://" not in url
    parts = urlsplit(("//" + url) if schemeless else url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(sensitive_param(k) for k, _ in pairs):
            query = urlencode([(k, REDACTED if sensitive_param(k) else v) for k, v in pairs], safe="/:,")
    if netloc == parts.netloc and query == parts.query:
        return url
    rebuilt = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return rebuilt[2:] if schemeless else rebuilt


def redact_text(text: str) -> str:
    """Every ``scheme://`` URL inside ``text`` redacted (for messages, events and log lines)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts URLs in every record (install it on the root handlers so
    even a library's debug line that echoes a spec does not carry a credential)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
