"""Typed table properties: one parser per kind, one error (exit code 4) for a bad value."""

from __future__ import annotations

import pytest

from icectl.errors import CorruptInputError, ExitCode
from icectl.spec.properties import (
    COMMIT_NUM_RETRIES,
    GC_ENABLED,
    MANIFEST_TARGET_SIZE_BYTES,
    MAX_REF_AGE_MS,
    METADATA_DELETE_AFTER_COMMIT,
    V4_ROOT_MAX_ADDED_FILES,
    IntProperty,
)


def test_defaults_when_absent() -> None:
    assert COMMIT_NUM_RETRIES.parse({}) == 4
    assert MANIFEST_TARGET_SIZE_BYTES.parse({}) == 8 * 1024 * 1024
    assert MAX_REF_AGE_MS.parse({}) == (1 << 63) - 1
    assert V4_ROOT_MAX_ADDED_FILES.parse({}) == 50
    assert GC_ENABLED.parse({}) is True
    assert METADATA_DELETE_AFTER_COMMIT.parse({}) is False


def test_integers_are_read_with_surrounding_blanks() -> None:
    assert COMMIT_NUM_RETRIES.parse({"commit.retry.num-retries": " 7 "}) == 7
    assert COMMIT_NUM_RETRIES.parse({"commit.retry.num-retries": "-1"}) == -1  # callers clamp, as Java's


@pytest.mark.parametrize("prop, raw, words", [
    (COMMIT_NUM_RETRIES, "x", "is not an integer"),
    (V4_ROOT_MAX_ADDED_FILES, "1.5", "is not an integer"),
    (MANIFEST_TARGET_SIZE_BYTES, "0", "is not a positive integer"),
    (MANIFEST_TARGET_SIZE_BYTES, "8MB", "is not a positive integer"),
    (IntProperty("p", 3, minimum=2), "1", "is not an integer >= 2"),
])
def test_a_bad_value_is_corrupt_input(prop: IntProperty, raw: str, words: str) -> None:
    with pytest.raises(CorruptInputError) as info:
        prop.parse({prop.name: raw})
    assert info.value.exit_code == ExitCode.CORRUPT
    assert info.value.message == f"table property {prop.name}={raw!r} {words}"
    assert info.value.hint is not None and f"(default {prop.default})" in info.value.hint


def test_booleans_follow_java_parse_boolean() -> None:
    assert GC_ENABLED.parse({"gc.enabled": "TRUE"}) is True
    for raw in ("false", "yes", "1", " true", ""):  # anything but "true" in any case is false
        assert GC_ENABLED.parse({"gc.enabled": raw}) is False
    assert GC_ENABLED.raw({"gc.enabled": "no"}) == "no" and GC_ENABLED.raw({}) == "true"
