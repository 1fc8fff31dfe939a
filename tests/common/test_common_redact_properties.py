"""Properties of URL redaction over generated URLs (hypothesis): whatever a URL carries in its
userinfo, query values, matrix parameters or fragment is gone from what is shown, while scheme,
host, port, path and parameter names stay; redacting twice changes nothing; and a URL quoted in
free text is redacted as it would be alone."""

from __future__ import annotations

import string
from dataclasses import dataclass
from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_common.redact import REDACTED, hidden_param, redact_text, redact_url, url_has_credentials

PROPERTIES = settings(deadline=None, max_examples=100, derandomize=True, database=None)

LOWER = string.ascii_lowercase + string.digits
# a secret starts with "sEc": no host, path or name (lower case) and not REDACTED can contain it
SECRET_TAIL = string.ascii_letters + string.digits + "-._~!$*+,:%"


def secrets(extra: str = "") -> st.SearchStrategy[str]:
    return st.text(SECRET_TAIL + extra, min_size=3, max_size=12).map(lambda tail: "sEc" + tail)


names = st.text(LOWER + "_-", min_size=1, max_size=10)
labels = st.text(string.ascii_lowercase, min_size=1, max_size=8)
hosts = st.one_of(
    st.lists(labels, min_size=1, max_size=3).map(".".join),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
)


@dataclass(frozen=True)
class Url:
    """A generated URL and the secrets it carries."""

    text: str
    scheme: str
    host: str
    port: int | None
    segments: tuple[str, ...]
    query_names: tuple[str, ...]
    secrets: tuple[str, ...]
    matrix_names: tuple[str, ...] = ()
    fragment: bool = False


@st.composite
def urls(draw: st.DrawFn, scheme: bool = True) -> Url:
    carried: list[str] = []
    userinfo = ""
    if draw(st.booleans()):
        user = draw(st.one_of(names, secrets()))
        password = draw(st.one_of(st.just(""), secrets("@=&;")))  # '@' too: the last one ends it
        userinfo = user + (f":{password}" if password else "") + "@"
        carried += [s for s in (user, password) if s.startswith("sEc")]
    host = draw(hosts)
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    segments = draw(st.lists(names, max_size=4))
    path = ""
    matrix: list[str] = []
    for segment in segments:
        params = draw(st.lists(st.tuples(names, secrets("=")), max_size=2))
        carried += [value for _, value in params]
        matrix += [name for name, _ in params]
        path += f"/{segment}" + "".join(f";{n}={v}" for n, v in params)
    query = draw(st.lists(st.tuples(names, secrets("=;/?@")), max_size=4))
    carried += [value for _, value in query]
    fragment = draw(st.one_of(st.none(), secrets("=&;/?@#")))
    carried += [fragment] if fragment else []
    text = (
        (f"{draw(st.sampled_from(['http', 'https', 'grpc', 'ws']))}://" if scheme else "")
        + f"{userinfo}{host}"
        + (f":{port}" if port is not None else "")
        + path
        + ("?" + "&".join(f"{n}={v}" for n, v in query) if query else "")
        + (f"#{fragment}" if fragment else "")
    )
    return Url(
        text,
        text.split("://")[0] if scheme else "",
        host,
        port,
        tuple(segments),
        tuple(n for n, _ in query),
        tuple(carried),
        tuple(matrix),
        fragment is not None,
    )


@PROPERTIES
@given(urls())
def test_no_secret_survives_and_the_address_is_kept(url: Url) -> None:
    shown = redact_url(url.text)
    assert not [s for s in url.secrets if s in shown], shown
    parts = urlsplit(shown)
    assert (parts.scheme, parts.hostname, parts.port) == (
        url.scheme,
        url.host.strip("[]").lower(),
        url.port,
    )
    assert [seg.split(";")[0] for seg in parts.path.split("/")[1:]] == list(url.segments)
    assert [p.split("=")[0] for p in parts.query.split("&") if p] == list(url.query_names)


@PROPERTIES
@given(urls(scheme=False))
def test_a_url_without_a_scheme_loses_its_secrets_too(url: Url) -> None:
    shown = redact_url(url.text)
    assert not [s for s in url.secrets if s in shown], shown
    parts = urlsplit("//" + shown)
    assert (parts.hostname, parts.port) == (url.host.strip("[]").lower(), url.port)


@PROPERTIES
@given(urls())
def test_redaction_is_idempotent(url: Url) -> None:
    once = redact_url(url.text)
    assert redact_url(once) == once
    assert redact_text(redact_text(url.text)) == redact_text(url.text)


@PROPERTIES
@given(urls())
def test_a_url_without_secrets_is_shown_as_it_is(url: Url) -> None:
    if not url.secrets and "@" not in url.text:
        assert redact_url(url.text) == url.text


@PROPERTIES
@given(urls(), st.sampled_from(["GET {} failed", "url='{}'", "({})", "see <{}>: 503", "{}"]))
def test_a_url_in_text_is_redacted_as_it_would_be_alone(url: Url, template: str) -> None:
    assert redact_text(template.format(url.text)) == template.format(redact_url(url.text))


@PROPERTIES
@given(urls())
def test_a_spec_may_carry_neither_userinfo_nor_a_secret_looking_name_nor_a_fragment(url: Url) -> None:
    named = any(hidden_param(name) for name in url.query_names + url.matrix_names)
    assert url_has_credentials(url.text) is ("@" in urlsplit(url.text).netloc or named or url.fragment)


@PROPERTIES
@given(st.text(max_size=80))
def test_any_text_is_redacted_without_raising_and_once_is_enough(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
    assert isinstance(redact_url(text), str)
    assert REDACTED in once or once == text
