"""icectl/spec/durations.py: one parser for durations and points in time, one way to show retention."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icectl.errors import UsageError
from icectl.spec.durations import MAX_LONG, duration_ms, human_duration, parse_duration_ms, parse_point_in_time_ms

DAY = 86_400_000


@pytest.mark.parametrize(("text", "ms"), [
    ("7d", 7 * DAY), ("12h", 12 * 3_600_000), ("30m", 1_800_000), ("90s", 90_000), ("500ms", 500),
    ("2w", 14 * DAY), ("7 days", 7 * DAY), ("1h30m", 5_400_000), ("1.5d", 36 * 3_600_000), (" 3D ", 3 * DAY),
])
def test_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "7", "d", "7x", "7d junk", "-7d", "7d-", "1e3s", "days"])
def test_not_durations(text: str) -> None:
    assert duration_ms(text) is None
    with pytest.raises(UsageError, match="--max-ref-age"):
        parse_duration_ms(text, "--max-ref-age")


def test_points_in_time() -> None:
    now = 1_700_000_000_000
    assert parse_point_in_time_ms("1d", now, "--to-timestamp") == now - DAY
    assert parse_point_in_time_ms("1699999999999", now, "--to-timestamp") == 1_699_999_999_999
    utc = int(datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    assert parse_point_in_time_ms("2024-05-01T00:00:00Z", now, "x") == utc
    assert parse_point_in_time_ms("2024-05-01", now, "x") == utc  # no zone: UTC
    assert parse_point_in_time_ms("2024-05-01T02:00:00+02:00", now, "x") == utc
    with pytest.raises(UsageError, match="--to-timestamp 'yesterday'"):
        parse_point_in_time_ms("yesterday", now, "--to-timestamp")


@pytest.mark.parametrize(("text", "ms"), [("0", 0), ("1000", 1000), ("123456789", 123_456_789), ("-5", -5),
                                          (str(MAX_LONG), MAX_LONG), (str(-MAX_LONG - 1), -MAX_LONG - 1)])
def test_epoch_milliseconds_of_any_length(text: str, ms: int) -> None:
    # 0 is 1970-01-01: a rollback to it finds nothing older (not found, exit 3), not a usage error
    assert parse_point_in_time_ms(text, 1_700_000_000_000, "--to-timestamp") == ms


@pytest.mark.parametrize("text", [str(MAX_LONG + 1), str(-MAX_LONG - 2), str(2**64)])
def test_epoch_milliseconds_beyond_a_long_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="beyond the signed 64-bit range"):
        parse_point_in_time_ms(text, 1_700_000_000_000, "--older-than")


def test_epoch_seconds_are_refused_and_eight_digits_are_a_date() -> None:
    with pytest.raises(UsageError, match="looks like epoch seconds"):
        parse_point_in_time_ms("1700000000", 0, "--older-than")
    may_first = int(datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    assert parse_point_in_time_ms("20240501", 0, "--to-timestamp") == may_first


@pytest.mark.parametrize(("ms", "text"), [
    (None, "-"), (0, "0ms"), (999, "999ms"), (90_000, "1m 30s"), (5 * DAY, "5d"), (10 * DAY, "10d"),
    (14 * DAY, "2w"), (DAY + 12 * 3_600_000, "1d 12h"), (MAX_LONG, "forever"), (DAY + 1, "1d"),
])
def test_human_duration(ms: int | None, text: str) -> None:
    assert human_duration(ms) == text


_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY, "w": 7 * DAY}


@given(st.integers(min_value=1, max_value=10_000), st.sampled_from(["s", "m", "h", "d", "w"]))
def test_shown_duration_reads_back(n: int, unit: str) -> None:
    # What human_duration prints reads back as a duration, short of the original by less than
    # its last unit (it shows at most two units: 3661s is "1h 1m").
    ms = duration_ms(f"{n}{unit}")
    assert ms is not None
    shown = human_duration(ms)
    back = duration_ms(shown.replace(" ", ""))
    assert back is not None
    last = shown.split()[-1].lstrip("0123456789")
    assert 0 <= ms - back < _UNIT_MS[last]
    assert len(shown.split()) <= 2
