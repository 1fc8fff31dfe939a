"""The one redaction rule: credentials by position (every query value, matrix parameter value,
fragment and userinfo), free text scrubbed even where no scheme precedes the query (urllib3's
retry line); and what a spec may carry, by name (percent-encoded names as what they decode to)."""

from __future__ import annotations

import pytest

from mcp_common.redact import REDACTED, hidden_param, redact_text, redact_url, url_has_credentials

CANARY = "CANARY-9b1d"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://h/x?%74oken={CANARY}", f"http://h/x?%74oken={REDACTED}"),
        (f"http://h/x?a=1&%2574oken={CANARY}", f"http://h/x?a={REDACTED}&%2574oken={REDACTED}"),
        (f"http://h/x?ToK%65n={CANARY}&b=c%20d", f"http://h/x?ToK%65n={REDACTED}&b={REDACTED}"),
        (f"/api/v1/query?query=up&token={CANARY}", f"/api/v1/query?query={REDACTED}&token={REDACTED}"),
    ],
)
def test_every_value_is_hidden_and_every_name_kept_byte_for_byte(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert url_has_credentials(url)


@pytest.mark.parametrize(
    ("name", "hidden"),
    [
        ("token", True),
        ("%74oken", True),
        ("a%20b", True),
        ("x_api_key", True),
        ("keyboard", False),
        ("accessToken", True),
        ("apiKey", True),
        ("X-Sig", True),
        ("SID", True),
        ("session_id", True),
        ("passage", False),
        ("model", False),
    ],
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
    assert cleaned.endswith(f"/api/v1/query?query={REDACTED}&token={REDACTED}")


@pytest.mark.parametrize(
    "text",
    [
        f"GET /x?%74oken={CANARY} failed",
        f"'/config_dump?access_token={CANARY}'",
        f"url='http://h:1/x?sig={CANARY}'",
        f"see http://u:{CANARY}@h/ and /p?api_key={CANARY}&ok=1",
        f"GET http://h/v1#access_token={CANARY} ok",
        f"url=http://h/v1?token[]={CANARY} x",
        f"path /v1?token[]={CANARY}&b=2",
        f"/v1;token={CANARY} y",
        f"Authorization: Bearer {CANARY}",
        f"headers {{'Authorization': 'Bearer {CANARY}', 'X-Api-Key': '{CANARY}'}}",
        f'"proxy-authorization": "Basic {CANARY}"',
        f"cookie: session={CANARY}",
        f"the server refused bearer {CANARY}",
    ],
)
def test_text_loses_every_credential(text: str) -> None:
    assert CANARY not in redact_text(text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"Authorization: Bearer {CANARY}", "Authorization: Bearer REDACTED"),
        (f"X-Api-Key: {CANARY}", "X-Api-Key: REDACTED"),
        (f"{{'authorization': 'Basic {CANARY}'}}", "{'authorization': 'Basic REDACTED'}"),
        (f"cookie={CANARY}; path=/", "cookie=REDACTED; path=/"),
        (f"the server refused bearer {CANARY}: 401", "the server refused bearer REDACTED: 401"),
    ],
)
def test_a_credential_headers_value_is_hidden_its_name_and_scheme_kept(text: str, shown: str) -> None:
    assert redact_text(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "no url here",
        "a=b c=d",
        "ratio 0.99 >= 0.9999?",
        "GET /x/y/z failed",
        "http://ok/v1 & more",
        "a;b=c",
        "the authorization server answered 503",
    ],
)
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://h/app;jsessionid={CANARY}/x", f"http://h/app;jsessionid={REDACTED}/x"),
        (f"http://h/a;v=1;{CANARY}/b;w=2", f"http://h/a;v={REDACTED};{REDACTED}/b;w={REDACTED}"),
        (f"https://h/cb#access_token={CANARY}&state=1", f"https://h/cb#{REDACTED}"),
        (f"http://h/x?{CANARY}&a=&&b=1", f"http://h/x?{REDACTED}&a={REDACTED}&&b={REDACTED}"),
        (f"http://h/x?token=a={CANARY}", f"http://h/x?token={REDACTED}"),
        (f"http://u:p@ss{CANARY}@h:81/x", f"http://{REDACTED}@h:81/x"),  # '@' inside the password
        (f"u:{CANARY}@h/x;s={CANARY}", f"{REDACTED}@h/x;s={REDACTED}"),  # no scheme
        (f"u:{CANARY}@h/x?next=http://a", f"{REDACTED}@h/x?next={REDACTED}"),  # a '://' is no scheme
    ],
)
def test_credentials_are_known_by_position(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert redact_url(expected) == expected


def test_what_does_not_parse_as_a_url_is_hidden_whole() -> None:
    assert redact_url(f"http://[::1{CANARY}/x") == REDACTED
    assert not url_has_credentials(f"http://[::1{CANARY}/x")


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://h/v1?model=llama&stream=1", False),
        ("http://h/a;v=1", False),  # a matrix parameter by a plain name
        ("http://h/a;jsessionid=1", True),  # by a secret-looking one
        ("http://h/a#frag", True),  # a fragment is never sent; only a token has a reason to be there
        ("http://h/x?accessToken=1", True),  # camelCase
        ("http://h/x?apiToken=1", True),
        ("http://h/x?token[]=1", True),  # PHP-style array
        ("http://h/x?jwt=1", True),
        ("http://h/x?apiKey=1&keyboard=2", True),
        ("http://h/x?keyboard=2&monkey=3&design=4", False),  # words that only contain a short one
        ("http://u@h/", True),
        ("http://h/x?a=1&x_api_key=2", True),
        ("http://h/x?%6Dodel=1", True),  # any encoded name
        ("h:80/x?token", False),  # a bare piece names no parameter
        ("http://h/x?token=a=b", True),  # the name ends at the first '='
    ],
)
def test_what_a_spec_may_carry_is_judged_by_name(url: str, refused: bool) -> None:
    assert url_has_credentials(url) is refused


def test_text_loses_every_query_value_with_or_without_a_scheme() -> None:
    assert redact_text(f"GET /q?query=up&step={CANARY} 503") == f"GET /q?query={REDACTED}&step={REDACTED} 503"
    assert redact_text(f"see <http://h/x#{CANARY}>") == f"see <http://h/x#{REDACTED}>"
    assert redact_text(f"GET http://u:{CANARY}@[::1]:80/x;s={CANARY}#{CANARY} failed") == (
        f"GET http://{REDACTED}@[::1]:80/x;s={REDACTED}#{REDACTED} failed"  # an IPv6 host is no end
    )
