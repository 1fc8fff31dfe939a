"""The one redaction rule: percent-encoded parameter names are hidden as the names they decode to,
and free text loses a credential even where no scheme precedes the query (urllib3's retry line)."""

from __future__ import annotations

import pytest

from mcp_checks.redact import REDACTED, hidden_param, redact_text, redact_url, url_has_credentials

CANARY = "CANARY-9b1d"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://h/x?%74oken={CANARY}", f"http://h/x?%74oken={REDACTED}"),
        (f"http://h/x?a=1&%2574oken={CANARY}", f"http://h/x?a=1&%2574oken={REDACTED}"),  # encoded twice
        (f"http://h/x?ToK%65n={CANARY}&b=c%20d", f"http://h/x?ToK%65n={REDACTED}&b=c%20d"),
        (f"/api/v1/query?query=up&token={CANARY}", f"/api/v1/query?query=up&token={REDACTED}"),
    ],
)
def test_encoded_names_are_hidden_and_the_rest_kept_byte_for_byte(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert url_has_credentials(url)


@pytest.mark.parametrize(
    ("name", "hidden"),
    [("token", True), ("%74oken", True), ("a%20b", True), ("x_api_key", True), ("keyboard", False)],
)
def test_which_names_hide_their_value(name: str, hidden: bool) -> None:
    assert hidden_param(name) is hidden


def test_a_path_and_query_without_a_scheme_is_scrubbed_in_text() -> None:
    """urllib3 logs a retried request as its path and query only, so the URL pass cannot see it."""
    line = (
        "Retrying (Retry(total=2, connect=None, read=None, redirect=None, status=None)) after connection "
        f"broken by 'NewConnectionError(...)': /api/v1/query?query=up&token={CANARY}"
    )
    cleaned = redact_text(line)
    assert CANARY not in cleaned
    assert cleaned.endswith(f"/api/v1/query?query=up&token={REDACTED}")


@pytest.mark.parametrize(
    "text",
    [
        f"GET /x?%74oken={CANARY} failed",
        f"'/config_dump?access_token={CANARY}'",
        f"url='http://h:1/x?sig={CANARY}'",
        f"see http://u:{CANARY}@h/ and /p?api_key={CANARY}&ok=1",
    ],
)
def test_text_loses_every_credential(text: str) -> None:
    assert CANARY not in redact_text(text)


@pytest.mark.parametrize(
    "text", ["no url here", "a=b c=d", "ratio 0.99 >= 0.9999?", "GET /x?monkey=1&a=b%20c", "http://ok/?q=1"]
)
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact_text(text) == text
