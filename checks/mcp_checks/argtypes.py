"""``type=`` functions for ``mcp-check``'s flags: a value out of its range is a usage error
(exit 2) before anything runs, and argparse names the flag (``argument --threshold: ...``) in
front of the message raised here. The ranges are the MCPReadiness API's own, so a flag takes
what a manifest's field takes. Standard library only: the CLI imports this before it knows
which command runs.
"""

from __future__ import annotations

import math
import re
from argparse import ArgumentTypeError
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from mcp_common import rfc3339

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]@]+):(\d{1,5})")


def _range(minimum: float | None, above: float | None, maximum: float | None) -> str:
    low = f"at least {minimum:g}" if minimum is not None else f"above {above:g}" if above is not None else ""
    if maximum is None:
        return low
    if minimum is not None:
        return f"from {minimum:g} to {maximum:g}"
    return f"{low} and at most {maximum:g}" if low else f"at most {maximum:g}"


def _check(
    text: str,
    value: float,
    minimum: float | None,
    above: float | None,
    maximum: float | None,
    hint: str,
) -> None:
    if (
        (minimum is not None and value < minimum)
        or (above is not None and value <= above)
        or (maximum is not None and value > maximum)
    ):
        note = f" ({hint})" if hint else ""
        raise ArgumentTypeError(f"must be {_range(minimum, above, maximum)}{note}, got {text!r}")


def number(
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    hint: str = "",
) -> Callable[[str], float]:
    """A finite number within the bounds (``above``: exclusive)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise ArgumentTypeError(f"{text!r} is not a finite number")
        _check(text, value, minimum, above, maximum, hint)
        return value

    parse.__name__ = "number"
    return parse


def integer(
    *, minimum: int | None = None, maximum: int | None = None, hint: str = ""
) -> Callable[[str], int]:
    """A whole number within the bounds (inclusive)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ArgumentTypeError(f"{text!r} is not a whole number") from None
        _check(text, value, minimum, None, maximum, hint)
        return value

    parse.__name__ = "integer"
    return parse


def parse_seconds(text: str) -> float:
    """Seconds from ``90``, ``90s``, ``10m``, ``1h30m``, ``500ms`` (kubectl's forms); a
    ``ValueError`` for anything else."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        if not text or _DURATION.sub("", text):
            raise ValueError(f"{text!r} is not a duration: use seconds or 90s, 10m, 1h30m, 500ms") from None
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION.findall(text))
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is not a finite duration")
    return seconds


def duration(
    *, minimum: float | None = None, above: float | None = None, maximum: float | None = None
) -> Callable[[str], float]:
    """Seconds (see ``parse_seconds``) within the bounds (``above``: exclusive)."""

    def parse(text: str) -> float:
        try:
            seconds = parse_seconds(text)
        except ValueError as exc:
            raise ArgumentTypeError(str(exc)) from None
        _check(text, seconds, minimum, above, maximum, "seconds")
        return seconds

    parse.__name__ = "duration"
    return parse


def http_url(text: str) -> str:
    """An ``http://`` or ``https://`` URL with a host (and a valid port, if any)."""
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or "://" not in text:
        example = f"http://{text}" if "://" not in text else "http://host:port"
        raise ArgumentTypeError(f"{text!r} is not an http(s) URL: give the scheme, e.g. {example}")
    if not parts.hostname or any(c.isspace() for c in text):
        raise ArgumentTypeError(f"{text!r} is not an http(s) URL: it names no host")
    try:
        port = parts.port
    except ValueError:  # not a number, or above 65535
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise ArgumentTypeError(f"{text!r}: the port must be a number from 1 to 65535")
    return text


def host_port(text: str) -> str:
    """``host:port`` with the port spelled out (``[v6]:port`` for an IPv6 address): a gRPC
    target without a port would dial 443."""
    if "://" in text:
        raise ArgumentTypeError(f"{text!r}: give host:port, without a scheme (CSDS is plaintext gRPC)")
    found = _HOST_PORT.fullmatch(text)
    if found is None:
        raise ArgumentTypeError(f"{text!r} is not host:port: name the port, e.g. istiod.istio-system:15010")
    if not 1 <= int(found.group(2)) <= 65535:
        raise ArgumentTypeError(f"{text!r}: the port must be a number from 1 to 65535")
    return text


def url_path(text: str) -> str:
    """A URL path: it starts with ``/``."""
    if not text.startswith("/") or any(c.isspace() for c in text):
        raise ArgumentTypeError(f"{text!r} is not a path: it starts with /, e.g. /health")
    return text


def existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise ArgumentTypeError(f"{text}: {'a directory' if path.is_dir() else 'no such file'}")
    return path


def output_file(text: str) -> Path:
    """A file to write: its directory exists (checked before the checks run, not after)."""
    path = Path(text)
    if path.is_dir():
        raise ArgumentTypeError(f"{text}: a directory, not a file")
    if not path.parent.is_dir():
        raise ArgumentTypeError(f"{text}: the directory {path.parent} does not exist")
    return path


def key_value(text: str) -> str:
    """``KEY=VALUE`` with a key."""
    key, equals, _ = text.partition("=")
    if not equals or not key.strip():
        raise ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return text


def recording_rule(text: str) -> str:
    """``record`` or ``record=expr``, both named."""
    record, equals, expr = text.partition("=")
    if not record.strip() or (equals and not expr.strip()):
        raise ArgumentTypeError(f"{text!r}: give a record name, or record=expr")
    return text


def slash_parts(form: str, required: int, optional: int = 0) -> Callable[[str], str]:
    """``A/B/C`` with ``required`` non-empty parts and up to ``optional`` more (``form`` is the
    shape the message shows, e.g. ``NAMESPACE/NAME/KEY``)."""

    def parse(text: str) -> str:
        parts = text.split("/")
        if not required <= len(parts) <= required + optional or not all(p.strip() for p in parts):
            raise ArgumentTypeError(f"{text!r} is not {form}")
        return text

    parse.__name__ = "slash_parts"
    return parse


def instant(text: str) -> float:
    """A point in time as Unix seconds: RFC 3339 (``2026-12-06T10:00:00Z``) or a number."""
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise ArgumentTypeError(f"{text!r} is not a finite time")
        return seconds
    try:
        return rfc3339.parse(text).timestamp()
    except rfc3339.MissingZone:
        raise ArgumentTypeError(f"{text!r} has no time zone: add Z or an offset") from None
    except ValueError:
        raise ArgumentTypeError(
            f"{text!r} is not a time: use RFC 3339 (2026-12-06T10:00:00Z) or Unix seconds"
        ) from None
