"""icectl.cli.output.health.words: the numbers of a health document in words (binary sizes, durations,
percentages), where the target size falls on the histogram, and operations folded for stacking."""

from __future__ import annotations

import pytest

from icectl.cli.output.health.words import (
    bin_is_small,
    bucket_operations,
    fmt_axis_time,
    fmt_bytes,
    fmt_duration,
    fmt_partition,
    fmt_ratio,
    fmt_threshold,
    fmt_time,
    fmt_value,
    recommendations,
    status_words,
    target_position,
)


@pytest.mark.parametrize(("value", "text"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (14_200, "14 KiB"),
    (8 << 20, "8 MiB"), (536_870_912, "512 MiB"), (int(2.4 * (1 << 30)), "2.4 GiB"), (None, "–"), ("x", "–"),
])
def test_bytes(value: object, text: str) -> None:
    assert fmt_bytes(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (999, "999ms"), (45_000, "45s"), (5_400_000, "1h 30m"), (432_000_000, "5d"),
    (90_061_000, "1d 1h"), (86_400_000 + 60_000, "1d 1m"), (315_360_000_000, "3650d"), (None, "–"),
])
def test_duration(value: object, text: str) -> None:
    assert fmt_duration(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (0, "0%"), (0.998, "99.8%"), (0.5, "50%"), (16 / 2179, "0.73%"), (1e-5, "<0.01%"), (1, "100%"), (None, "–"),
])
def test_ratio(value: object, text: str) -> None:
    assert fmt_ratio(value) == text


def test_values_by_unit_times_and_partitions() -> None:
    assert [fmt_value(600, "count"), fmt_value(8 << 20, "bytes"), fmt_value(0.25, "ratio"),
            fmt_value(7 * 86_400_000, "ms"), fmt_value(None, "count"), fmt_value(True, "count"),
            fmt_value("v3", "count")] == [
        "600", "8 MiB", "25%", "1w", "–", "yes", "v3"]
    assert fmt_time(1_735_689_600_000) == "2025-01-01 00:00"
    assert fmt_partition({"day": "2024-01-02", "b": None}) == "day=2024-01-02/b=null"
    assert fmt_partition({}) == fmt_partition(None) == "(unpartitioned)"


def test_target_position_on_power_of_two_bins() -> None:
    bins = [{"lower_bytes": 0, "upper_bytes": 1024}, {"lower_bytes": 1024, "upper_bytes": 4096},
            {"lower_bytes": 4096, "upper_bytes": None}]
    assert target_position(bins, 512) == 0.5  # linear in the first bin, which starts at 0
    assert target_position(bins, 2048) == pytest.approx(1.5)  # log scale: 2 KiB is halfway from 1 to 4 KiB
    assert target_position(bins, 4096) == 2.0
    assert target_position(bins, 1 << 40) == 2.0  # inside the open last bin: its left edge
    assert target_position(bins, None) is None and target_position([], 10) is None


def test_operations_fold_into_the_stacking_order() -> None:
    assert bucket_operations({"snapshots": 7, "operations": {"delete": 1, "append": 2, "rewrite": 3}}) == {
        "append": 2, "overwrite": 0, "delete": 1, "replace": 0, "other": 4}  # 3 rewrites + 1 without an operation


def test_status_and_recommendations_fall_back_on_the_checks() -> None:
    checks = [{"id": "a", "crossed": True, "recommendation": "icectl compact t"},
              {"id": "b", "crossed": True, "recommendation": "icectl compact t"},
              {"id": "c", "crossed": False, "recommendation": "icectl expire-snapshots t"}]
    doc = {"checks": checks}
    assert status_words(doc) == "needs attention (2 of 3 checks crossed)"
    assert recommendations(doc) == ["icectl compact t"]
    assert status_words({"checks": checks[2:], "healthy": True}) == "healthy"
    assert status_words({"error": "boom"}) == "could not be checked"


def test_thresholds_say_which_way_they_are_crossed() -> None:
    assert fmt_threshold({"threshold": 500, "unit": "count", "comparison": ">="}) == "≥ 500"
    assert fmt_threshold({"threshold": 8 << 20, "unit": "bytes", "comparison": "<"}) == "< 8 MiB"
    assert fmt_threshold({"threshold": 0.5, "unit": "ratio"}) == "50%"  # no comparison: the bare value
    assert fmt_threshold({"threshold": None, "unit": "count", "comparison": ">"}) == "–"


def test_small_bins_follow_the_documents_flag_else_the_target() -> None:
    assert bin_is_small({"upper_bytes": 100, "small": False}, 1000) is False
    assert bin_is_small({"upper_bytes": 5000, "small": True}, 1000) is True
    assert bin_is_small({"upper_bytes": 1000}, 1000) is True and bin_is_small({"upper_bytes": None}, 1000) is False


def test_axis_times_are_as_precise_as_the_span_needs() -> None:
    t = 1_735_689_600_000 + 61_123  # 2025-01-01 00:01:01.123
    assert fmt_axis_time(t, 3 * 86_400_000) == "2025-01-01"
    assert fmt_axis_time(t, 3_600_000) == "2025-01-01 00:01"
    assert fmt_axis_time(t, 60_000) == "2025-01-01 00:01:01"
    assert fmt_axis_time(t, 98) == "2025-01-01 00:01:01.123"
