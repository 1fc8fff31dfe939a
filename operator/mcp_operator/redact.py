"""Credentials out of what the operator writes: URLs shown with userinfo and secret-looking query
parameters replaced by ``REDACTED``, and free text (messages, events, logs) scrubbed of such URLs.

The pure rule lives in ``mcp_common.redact`` (the checks redact their own sources with it, and
they may not import the operator); it is re-exported here with the logging filter.
"""

from __future__ import annotations

import logging

from mcp_common.redact import (
    REDACTED,
    SECRET_NAME,
    hidden_param,
    redact_query,
    redact_text,
    redact_url,
    sensitive_param,
    url_has_credentials,
)

__all__ = [
    "MAX_EVENT_MESSAGE",
    "REDACTED",
    "SECRET_NAME",
    "RedactingFilter",
    "event_text",
    "hidden_param",
    "redact_query",
    "redact_text",
    "redact_url",
    "sensitive_param",
    "url_has_credentials",
]

MAX_EVENT_MESSAGE = 1024  # what kopf posts whole (it cuts a longer message in the middle)


def event_text(message: str) -> str:
    """``message`` as an event of ours carries it: redacted (anyone who may list events in the
    namespace reads it), then cut. One rule for the events posted and the verdict's event
    recorded in status (``readiness.verdictevents``), so the two are the same text."""
    return redact_text(message)[:MAX_EVENT_MESSAGE]


class RedactingFilter(logging.Filter):
    """A logging filter that redacts URLs in every record (install it on the root handlers so
    even a library's debug line that echoes a spec does not carry a credential)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
