"""The one RFC 3339 parser: Z and offsets as instants, Prometheus's and Go's nine fraction digits
kept to the microsecond, lowercase z only where asked for, a missing zone refused apart from
garbage, and every refusal a ValueError that names the text."""

from __future__ import annotations

import datetime as dt

import pytest

from mcp_common import rfc3339

UTC = dt.UTC
NOON = dt.datetime(2026, 5, 1, 12, tzinfo=UTC)


def test_z_is_utc() -> None:
    stamp = rfc3339.parse("2026-05-01T12:00:00Z")
    assert stamp == NOON
    assert stamp.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("2026-05-01T14:00:00+02:00", dt.timedelta(hours=2)),
        ("2026-05-01T06:30:00-05:30", dt.timedelta(hours=-5.5)),
    ],
)
def test_an_offset_is_kept_and_names_the_same_instant(text: str, offset: dt.timedelta) -> None:
    stamp = rfc3339.parse(text)
    assert stamp.utcoffset() == offset
    assert stamp == NOON
    assert stamp.timestamp() == NOON.timestamp()


@pytest.mark.parametrize("text", ["2026-05-01T12:00:00.123456789Z", "2026-05-01T14:00:00.123456789+02:00"])
def test_nine_fraction_digits_are_read_to_the_microsecond(text: str) -> None:
    # What Prometheus and Go write (RFC3339Nano): the digits past the sixth are dropped, not rounded.
    assert rfc3339.parse(text) == NOON.replace(microsecond=123456)


def test_a_short_fraction_is_a_fraction_not_microseconds() -> None:
    assert rfc3339.parse("2026-05-01T12:00:00.5Z").microsecond == 500000


def test_lowercase_z_only_when_asked() -> None:
    with pytest.raises(ValueError, match="'2026-05-01T12:00:00z'"):
        rfc3339.parse("2026-05-01T12:00:00z")
    assert rfc3339.parse("2026-05-01T12:00:00z", lowercase_z=True) == NOON
    assert rfc3339.parse("2026-05-01t12:00:00.5z", lowercase_z=True) == NOON.replace(microsecond=500000)


def test_a_missing_zone_is_refused_when_required() -> None:
    with pytest.raises(rfc3339.MissingZone, match=r"'2026-05-01T12:00:00' has no time zone"):
        rfc3339.parse("2026-05-01T12:00:00")
    with pytest.raises(ValueError, match="has no time zone"):  # a MissingZone is a ValueError
        rfc3339.parse("2026-05-01T12:00:00", zone_required=True)


def test_a_missing_zone_is_a_naive_time_when_not_required() -> None:
    stamp = rfc3339.parse("2026-05-01T12:00:00", zone_required=False)
    assert stamp == dt.datetime(2026, 5, 1, 12)
    assert stamp.tzinfo is None
    # with a zone, zone_required changes nothing
    assert rfc3339.parse("2026-05-01T12:00:00Z", zone_required=False) == NOON


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-05-01T24:00:00Z",
        "2026-05-01T12:00:00ZZ",
        "2026-05-01Z",  # a Z not at the end: the copies that replaced every Z read a naive midnight
        "2026-05-01Z+02:00",
        " 2026-05-01T12:00:00Z",
    ],
)
@pytest.mark.parametrize("zone_required", [True, False])
def test_garbage_is_a_value_error_naming_the_text(text: str, zone_required: bool) -> None:
    with pytest.raises(ValueError) as caught:
        rfc3339.parse(text, zone_required=zone_required)
    assert not isinstance(caught.value, rfc3339.MissingZone)
    assert str(caught.value) == f"{text!r} is not an RFC 3339 time such as 2026-05-01T12:00:00Z"


def test_go_zero_time_parses_for_the_caller_to_judge() -> None:
    # Prometheus writes Go's zero time for a rule never evaluated; the drift check maps it to None.
    assert rfc3339.parse("0001-01-01T00:00:00Z") == dt.datetime(1, 1, 1, tzinfo=UTC)
