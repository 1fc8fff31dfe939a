"""One parser for the RFC 3339 times the project reads: what the Kubernetes API and the
operator's status write (``2026-05-01T12:00:00Z``), what Prometheus, Go and Envoy write (up to
nine fraction digits), and what a user gives on the command line. Each reader used to carry its
own copy of ``datetime.fromisoformat(text.replace("Z", "+00:00"))``; they now share this one and
keep only their own words for a refusal and their own answer to a missing or broken time.

Python 3.11's ``datetime.fromisoformat`` does the work: it reads ``Z`` and offsets, and it keeps
microseconds of a longer fraction (the rest is dropped, not rounded: ``k6``'s reader keeps
nanoseconds itself). It refuses a lowercase ``z``, which RFC 3339 allows, unless the caller asks
for it. It is more lenient than RFC 3339 elsewhere (a date alone, ``20260501T120000Z``, any one
character between date and time), and so is this parser, as every copy was. Only a final ``z``
is read as UTC: most copies replaced every ``Z``, so that ``2026-05-01Z`` parsed as a naive
midnight; it is refused now.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["MissingZone", "parse"]


class MissingZone(ValueError):
    """A well-formed time without ``Z`` or an offset where a zone is required: a caller that
    words this refusal apart (``add Z or an offset``) catches it before ``ValueError``."""


def parse(text: str, *, zone_required: bool = True, lowercase_z: bool = False) -> dt.datetime:
    """``text`` as an aware datetime (naive when it names no zone and ``zone_required`` is off).

    ``Z`` means UTC; with ``lowercase_z`` so does ``z``. Raises ``ValueError`` naming ``text``
    when it is not a time, and ``MissingZone`` (a ``ValueError``) when a required zone is absent.
    """
    iso = text[:-1] + "Z" if lowercase_z and text.endswith("z") else text
    try:
        stamp = dt.datetime.fromisoformat(iso)
    except ValueError as exc:
        raise ValueError(f"{text!r} is not an RFC 3339 time such as 2026-05-01T12:00:00Z") from exc
    if zone_required and stamp.tzinfo is None:
        raise MissingZone(f"{text!r} has no time zone: add Z or an offset")
    return stamp
