"""check_property_value: what `icectl properties set` accepts for the keys icectl interprets, and
the refusal of reserved keys (exit 2, one line naming the key, what is wrong and what to do)."""

from __future__ import annotations

import pytest

from icectl.errors import ExitCode, UsageError
from icectl.spec.properties import (
    COMMIT_NUM_RETRIES,
    GC_ENABLED,
    INTERPRETED_PROPERTIES,
    RESERVED_PROPERTIES,
    check_property_value,
)


@pytest.mark.parametrize("key, value", [
    ("commit.retry.num-retries", "0"), ("commit.retry.num-retries", "2147483647"),
    ("commit.retry.min-wait-ms", "+5"), ("commit.retry.total-timeout-ms", "0"),
    ("history.expire.min-snapshots-to-keep", "1"), ("history.expire.max-snapshot-age-ms", "0"),
    ("history.expire.max-ref-age-ms", "9223372036854775807"), ("gc.enabled", "FALSE"), ("gc.enabled", "True"),
    ("write.metadata.delete-after-commit.enabled", "true"), ("write.metadata.previous-versions-max", "1"),
    ("commit.manifest.target-size-bytes", "1"), ("write.v4.root-max-added-files", "0"),
    ("write.metadata.compression-codec", "GZIP"), ("write.metadata.compression-codec", "none"),
    ("write.format.default", "ORC"), ("write.format.default", "avro"),
    ("owner", ""), ("anything.else", " any text ="),  # not interpreted: any text
])
def test_good_values_pass(key: str, value: str) -> None:
    check_property_value(key, value)


@pytest.mark.parametrize("key, value, expected", [
    ("commit.retry.num-retries", "-1", "an integer from 0 to 2147483647"),
    ("commit.retry.num-retries", "2147483648", "an integer from 0 to 2147483647"),  # Java reads an int
    ("commit.retry.num-retries", " 4", "an integer from 0"),  # Integer.parseInt refuses blanks
    ("commit.retry.max-wait-ms", "1e3", "an integer from 0"),
    ("commit.retry.min-wait-ms", "٣", "an integer from 0"),  # a non-ASCII digit
    ("history.expire.min-snapshots-to-keep", "0", "an integer from 1 to 2147483647"),
    ("history.expire.max-ref-age-ms", "0", "an integer from 1 to 9223372036854775807"),
    ("history.expire.max-ref-age-ms", "9223372036854775808", "an integer from 1"),  # past Long.MAX_VALUE
    ("history.expire.max-snapshot-age-ms", "5d", "an integer from 0"),
    ("write.metadata.previous-versions-max", "0", "an integer from 1"),
    ("commit.manifest.target-size-bytes", "8MB", "an integer from 1"),
    ("write.v4.root-max-added-files", "-3", "an integer from 0"),
    ("gc.enabled", "yes", "true or false"), ("gc.enabled", "1", "true or false"),
    ("gc.enabled", " true", "true or false"),  # Boolean.parseBoolean(" true") is false
    ("write.metadata.delete-after-commit.enabled", "", "true or false"),
    ("write.metadata.compression-codec", "zstd", "one of none, gzip"),
    ("write.format.default", "csv", "one of parquet, avro, orc"),
])
def test_bad_values_are_usage_errors(key: str, value: str, expected: str) -> None:
    with pytest.raises(UsageError) as info:
        check_property_value(key, value)
    line = info.value.one_line()
    assert info.value.exit_code == ExitCode.USAGE
    assert line.startswith(f"{key}={value!r} is not {expected}") and "(default " in line
    assert "\n" not in line


def test_every_interpreted_property_refuses_garbage() -> None:
    """Each key icectl reads has a check: an IntProperty or BoolProperty added to the module without
    its place in INTERPRETED_PROPERTIES would let `properties set` write what icectl then refuses."""
    for key in INTERPRETED_PROPERTIES:
        with pytest.raises(UsageError):
            check_property_value(key, "not a value")
    assert {COMMIT_NUM_RETRIES.name, GC_ENABLED.name, "write.format.default"} <= INTERPRETED_PROPERTIES.keys()


@pytest.mark.parametrize("key", sorted(RESERVED_PROPERTIES))
def test_reserved_keys_are_refused_with_a_pointer(key: str) -> None:
    with pytest.raises(UsageError) as info:
        check_property_value(key, "2")
    line = info.value.one_line()
    assert line.startswith(f"{key} is a reserved table property")
    if key == "format-version":
        assert "use icectl upgrade TABLE --to N" in line
    elif key == "current-snapshot-id":
        assert "icectl set-current" in line
    else:
        assert "icectl" in line or "Spark" in line


@pytest.mark.parametrize("key", ["", " owner", "owner "])
def test_blank_keys_are_refused(key: str) -> None:
    with pytest.raises(UsageError, match="empty or starts or ends with blanks"):
        check_property_value(key, "x")


@pytest.mark.parametrize("value, ok", [
    ("s3://bucket/data", True), ("/srv/t/data", True), ("file:/srv/t/data", True), ("hdfs://nn:8020/d", True),
    ("data", False), ("./data", False), ("", False), ("bucket/data", False),
])
def test_own_folders_must_be_absolute(value: str, ok: bool) -> None:
    """write.data.path and its kin widen the delete fence: a relative path would put the fence
    wherever the command happens to run."""
    for key in ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path"):
        if ok:
            check_property_value(key, value)
        else:
            with pytest.raises(UsageError, match="is not an absolute path or URI"):
                check_property_value(key, value)
