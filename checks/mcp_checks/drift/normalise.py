"""Expressions compared by meaning, not by text: Prometheus re-prints an expression when it
loads it (``sum(x) by (job)`` becomes ``sum by (job) (x)``, ``[60s]`` becomes ``[1m]``), so
both sides go through its own printer, ``/api/v1/format_query``. A side it cannot format (a
Prometheus older than 2.32, an expression it does not parse) falls back to whitespace-normalised
text, and the comparison says so."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import requests

# a string literal (kept verbatim), a run of whitespace, or anything else
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`|\s+|[^\s"\'`]+|.', re.S)
_WORD = re.compile(r"[\w.:]")


def whitespace_normalised(expr: str) -> str:
    """Whitespace outside string literals reduced to what separates two words (one space), so
    layout alone never reads as a change and no two different expressions read the same."""
    tokens = _TOKEN.findall(expr.strip())
    out: list[str] = []
    for i, token in enumerate(tokens):
        if not token.isspace():
            out.append(token)
            continue
        before, after = (tokens[i - 1] if i else ""), (tokens[i + 1] if i + 1 < len(tokens) else "")
        if before and after and _WORD.match(before[-1]) and _WORD.match(after[0]):
            out.append(" ")
    return "".join(out)


@dataclass(frozen=True)
class Normalised:
    """``text`` as Prometheus prints it, or (``formatted`` False) whitespace-normalised, with
    ``why`` it could not be formatted."""

    text: str
    formatted: bool
    why: str = ""


@dataclass(frozen=True)
class Comparison:
    same: bool
    how: str  # "format_query", or why whitespace-normalised text was compared


class Normaliser:
    """Formats expressions through one Prometheus, once each (a check asks for the same
    expression on both sides and over several instants)."""

    def __init__(
        self, session: requests.Session, url: str, timeout_s: float, headers: Mapping[str, str]
    ) -> None:
        self._session, self._url, self._timeout_s = session, url.rstrip("/"), timeout_s
        self._headers = dict(headers)
        self._cache: dict[str, Normalised] = {}

    def _format(self, expr: str) -> Normalised:
        # POST: an expression may be longer than a URL should be
        resp = self._session.post(
            f"{self._url}/api/v1/format_query",
            data={"query": expr},
            timeout=self._timeout_s,
            headers=self._headers,
        )
        if resp.status_code == 404:
            why = "this Prometheus has no /api/v1/format_query"
            return Normalised(whitespace_normalised(expr), False, why)
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.ok and isinstance(body, dict) and isinstance(body.get("data"), str):
            return Normalised(body["data"], True)
        error = body.get("error") if isinstance(body, dict) else None
        why = f"format_query answered {resp.status_code}" + (f": {error}" if error else "")
        return Normalised(whitespace_normalised(expr), False, why)

    def __call__(self, expr: str) -> Normalised:
        if expr not in self._cache:
            self._cache[expr] = self._format(expr)
        return self._cache[expr]

    def compare(self, expected: str, loaded: str) -> Comparison:
        a, b = self(expected), self(loaded)
        if a.formatted and b.formatted:
            return Comparison(a.text == b.text, "format_query")
        why = a.why or b.why
        same = whitespace_normalised(expected) == whitespace_normalised(loaded)
        return Comparison(same, f"compared as whitespace-normalised text ({why})")
