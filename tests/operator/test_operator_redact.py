"""redact_url and redact_text: what the operator writes never carries a credential from a URL."""

from __future__ import annotations

import logging

import pytest

from mcp_operator.redact import REDACTED, RedactingFilter, redact_text, redact_url, url_has_credentials

TOKEN = "s3cr3t-T0KEN"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://user:{TOKEN}@host:8000/v1", "http://REDACTED@host:8000/v1"),
        (f"https://{TOKEN}@host/", "https://REDACTED@host/"),
        (f"http://host/x?token={TOKEN}&a=1", "http://host/x?token=REDACTED&a=REDACTED"),
        (f"http://host/x?a=1&access_token={TOKEN}", "http://host/x?a=REDACTED&access_token=REDACTED"),
        (f"http://host/x?API_KEY={TOKEN}", "http://host/x?API_KEY=REDACTED"),
        (f"http://host/x?apikey={TOKEN}&key={TOKEN}", "http://host/x?apikey=REDACTED&key=REDACTED"),
        (f"http://host/x?password={TOKEN}&secret={TOKEN}", "http://host/x?password=REDACTED&secret=REDACTED"),
        (f"http://host/x?sig={TOKEN}&signature={TOKEN}", "http://host/x?sig=REDACTED&signature=REDACTED"),
        (f"http://host/x?X-Amz-Signature={TOKEN}", "http://host/x?X-Amz-Signature=REDACTED"),
        (f"http://host/x?client_token={TOKEN}#frag", "http://host/x?client_token=REDACTED#REDACTED"),
        (f"u:{TOKEN}@host:80/p", "REDACTED@host:80/p"),  # no scheme: the CRD allows it
        (f"http://a:{TOKEN}@h/x?token={TOKEN}", "http://REDACTED@h/x?token=REDACTED"),
    ],
)
def test_credentials_are_redacted(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert TOKEN not in redact_url(url)
    assert url_has_credentials(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://triton.ml.svc:8000/v2/health/ready",
        "https://host/v1/chat/completions",
        "host:8000",
        "",
    ],
)
def test_clean_urls_are_returned_unchanged(url: str) -> None:
    assert redact_url(url) == url
    assert not url_has_credentials(url)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://host/delay?ms=2", "http://host/delay?ms=REDACTED"),
        ("http://host/x?monkey=1&a=b%20c", "http://host/x?monkey=REDACTED&a=REDACTED"),
    ],
)
def test_a_url_a_spec_may_carry_is_still_shown_without_its_values(url: str, shown: str) -> None:
    """Admission judges names (no secret-looking one); what is shown hides every value."""
    assert not url_has_credentials(url)
    assert redact_url(url) == shown


def test_urls_inside_text_are_redacted() -> None:
    text = f"Cannot connect to http://u:{TOKEN}@host:1/x?token={TOKEN} (refused); see http://ok/"
    cleaned = redact_text(text)
    assert TOKEN not in cleaned
    assert cleaned == (
        f"Cannot connect to http://{REDACTED}@host:1/x?token={REDACTED} (refused); see http://ok/"
    )
    assert redact_text("no url here") == "no url here"


def test_logging_filter_redacts_formatted_records(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.redact")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.DEBUG, logger="test.redact"):
        logger.debug("body: %s", {"url": f"http://x/?token={TOKEN}"})
    assert TOKEN not in caplog.text and "token=REDACTED" in caplog.text


def test_logging_filter_redacts_a_query_without_a_scheme(caplog: pytest.LogCaptureFixture) -> None:
    """urllib3's retry warning names the request by its path and query only."""
    logger = logging.getLogger("test.redact.urllib3")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.WARNING, logger="test.redact.urllib3"):
        logger.warning(
            "Retrying (%r) after connection broken by '%s': %s",
            "Retry(total=2)",
            "NewConnectionError",
            f"/api/v1/query?query=up&token={TOKEN}",
        )
    assert TOKEN not in caplog.text and "/api/v1/query?query=REDACTED&token=REDACTED" in caplog.text
