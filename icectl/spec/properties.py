"""Table properties (spec "Table Metadata": ``properties``, "used to control settings that affect
reading and writing"): the names and defaults icectl reads, as Iceberg Java's ``TableProperties``
(1.10) spells them, with one parser per kind.

A property is read where it is used, not when the table is loaded, so a bad value only fails the
command that needs it. Every bad value is the table's fault, not the command line's: it raises
:class:`~icectl.errors.CorruptInputError` (exit code 4). A value about to be *set*
(``icectl properties set``) is checked first by :func:`check_property_value`, stricter than the
readers (Java's ranges and int widths), so icectl never writes a value it or Java would refuse
or misread; that one is the command line's fault: :class:`~icectl.errors.UsageError` (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from icectl.errors import CorruptInputError, UsageError

JAVA_INT_MAX = (1 << 31) - 1
JAVA_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class IntProperty:
    """An integer (Java int or long) property; ``minimum``: smaller values are bad values."""

    name: str
    default: int
    minimum: int | None = None
    hint: str | None = None  # extra advice after "fix or remove it"
    # What ``properties set`` accepts (check_property_value): at least this (default: ``minimum``),
    # at most Java's int or long maximum (``java_int``: read with propertyAsInt).
    set_minimum: int | None = None
    java_int: bool = False

    def parse(self, properties: Mapping[str, str]) -> int:
        """The value in ``properties``, or the default when absent."""
        raw = properties.get(self.name)
        if raw is None:
            return self.default
        try:
            value = int(raw.strip())
        except ValueError:
            value = None
        if value is None or (self.minimum is not None and value < self.minimum):
            what = "a positive integer" if self.minimum == 1 else (
                "an integer" if self.minimum is None else f"an integer >= {self.minimum}")
            raise CorruptInputError(f"table property {self.name}={raw!r} is not {what}",
                                    hint=f"fix or remove it (default {self.default})"
                                    + (f", {self.hint}" if self.hint else ""))
        return value

    def check(self, text: str) -> None:
        """Refuse (exit 2) a value to be set that is no integer in the range icectl and Java accept."""
        low = self.set_minimum if self.set_minimum is not None else self.minimum
        high = JAVA_INT_MAX if self.java_int else JAVA_LONG_MAX
        kind = "an integer" if low is None else f"an integer from {low} to {high}"
        value = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None  # Java's parseInt: no blanks
        if value is None or (low is not None and value < low) or value > high:
            raise UsageError(f"{self.name}={text!r} is not {kind} (default {self.default})")


@dataclass(frozen=True)
class BoolProperty:
    """A boolean property, read as Java's ``Boolean.parseBoolean``: only ``true`` (any case) is true."""

    name: str
    default: bool

    def raw(self, properties: Mapping[str, str]) -> str:
        """The stored text, or the default's."""
        return properties.get(self.name, "true" if self.default else "false")

    def parse(self, properties: Mapping[str, str]) -> bool:
        return self.raw(properties).lower() == "true"

    def check(self, text: str) -> None:
        """Only true or false (any case): Java reads every other text as false, silently."""
        if text.lower() not in ("true", "false"):  # " true" is false to Java
            raise UsageError(f"{self.name}={text!r} is not true or false "
                             f"(default {'true' if self.default else 'false'})")


@dataclass(frozen=True)
class ChoiceProperty:
    """A property with a few allowed values (compared in any case, as Java's ``fromName``)."""

    name: str
    default: str
    choices: tuple[str, ...]

    def check(self, text: str) -> None:
        if text.lower() not in self.choices:
            raise UsageError(f"{self.name}={text!r} is not one of {', '.join(self.choices)} (default {self.default})")


# Commits (SnapshotProducer / Tasks.exponentialBackoff).
COMMIT_NUM_RETRIES = IntProperty("commit.retry.num-retries", 4, set_minimum=0, java_int=True)
COMMIT_MIN_RETRY_WAIT_MS = IntProperty("commit.retry.min-wait-ms", 100, set_minimum=0, java_int=True)
COMMIT_MAX_RETRY_WAIT_MS = IntProperty("commit.retry.max-wait-ms", 60_000, set_minimum=0, java_int=True)
COMMIT_TOTAL_RETRY_TIME_MS = IntProperty("commit.retry.total-timeout-ms", 1_800_000, set_minimum=0, java_int=True)
COMMIT_PROPERTIES = (COMMIT_NUM_RETRIES, COMMIT_MIN_RETRY_WAIT_MS, COMMIT_MAX_RETRY_WAIT_MS,
                     COMMIT_TOTAL_RETRY_TIME_MS)

# Manifests (RewriteManifests' target size).
MANIFEST_TARGET_SIZE_BYTES = IntProperty("commit.manifest.target-size-bytes", 8 * 1024 * 1024, minimum=1,
                                         hint="or pass --target-size")

# Metadata files (TableMetadata.Builder, CatalogUtil.deleteRemovedMetadataFiles, TableMetadataParser).
METADATA_PREVIOUS_VERSIONS_MAX = IntProperty("write.metadata.previous-versions-max", 100, set_minimum=1,
                                             java_int=True)
METADATA_DELETE_AFTER_COMMIT = BoolProperty("write.metadata.delete-after-commit.enabled", False)
METADATA_COMPRESSION = "write.metadata.compression-codec"  # none | gzip
METADATA_COMPRESSION_CHOICE = ChoiceProperty(METADATA_COMPRESSION, "none", ("none", "gzip"))

# Snapshot retention (RemoveSnapshots).
GC_ENABLED = BoolProperty("gc.enabled", True)
# Set-time minimums as a ref's own retention (SnapshotRef.Builder: > 0), except that a table-wide
# max snapshot age of 0 (expire everything but what refs keep) is meaningful.
MAX_SNAPSHOT_AGE_MS = IntProperty("history.expire.max-snapshot-age-ms", 5 * 24 * 60 * 60 * 1000, set_minimum=0)
MIN_SNAPSHOTS_TO_KEEP = IntProperty("history.expire.min-snapshots-to-keep", 1, set_minimum=1, java_int=True)
MAX_REF_AGE_MS = IntProperty("history.expire.max-ref-age-ms", (1 << 63) - 1, set_minimum=1)

# v4 (icectl's layout, design/v4-layout.md): files added by one commit above this many go into a
# new leaf instead of the root.
V4_ROOT_MAX_ADDED_FILES = IntProperty("write.v4.root-max-added-files", 50, set_minimum=0, java_int=True)

# The data file format engines write (Spark, Flink); icectl only checks it names one.
WRITE_FORMAT_DEFAULT = ChoiceProperty("write.format.default", "parquet", ("parquet", "avro", "orc"))

# Where the table's own files go (LocationProvider); the last two are deprecated spellings of
# write.data.path.
WRITE_DATA_PATH = "write.data.path"
WRITE_METADATA_PATH = "write.metadata.path"
OWN_PATH_PROPERTIES = (WRITE_DATA_PATH, WRITE_METADATA_PATH, "write.object-storage.path",
                       "write.folder-storage.path")

# Reading files without field ids (spec "Column Projection"). Its value is checked by
# icectl.ops.properties (the parser, spec/name_mapping.py, imports this module).
DEFAULT_NAME_MAPPING = "schema.name-mapping.default"

# TableProperties.RESERVED_PROPERTIES: derived from metadata, never stored as properties.
FORMAT_VERSION_PROPERTY = "format-version"
RESERVED_PROPERTIES = frozenset({
    FORMAT_VERSION_PROPERTY, "uuid", "snapshot-count", "current-snapshot-id", "current-snapshot-summary",
    "current-snapshot-timestamp-ms", "current-schema", "default-partition-spec", "default-sort-order",
})

# Where to go instead of setting a reserved property (``properties set/unset`` refuses them).
_RESERVED_POINTERS = {
    FORMAT_VERSION_PROPERTY: "use icectl upgrade TABLE --to N",
    "current-snapshot-id": "use icectl set-current TABLE --snapshot ID (or rollback)",
    "default-partition-spec": "icectl does not evolve partition specs; use Spark's ALTER TABLE",
    "default-sort-order": "icectl does not change sort orders; use Spark's ALTER TABLE ... WRITE ORDERED BY",
    "current-schema": "icectl does not evolve schemas; use Spark's ALTER TABLE",
}

# Every property icectl interprets, with its check and default (``properties list --all`` shows them).
INTERPRETED_PROPERTIES: dict[str, IntProperty | BoolProperty | ChoiceProperty] = {p.name: p for p in (
    *COMMIT_PROPERTIES, MANIFEST_TARGET_SIZE_BYTES, METADATA_PREVIOUS_VERSIONS_MAX, METADATA_DELETE_AFTER_COMMIT,
    METADATA_COMPRESSION_CHOICE, GC_ENABLED, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP, MAX_REF_AGE_MS,
    V4_ROOT_MAX_ADDED_FILES, WRITE_FORMAT_DEFAULT)}


def default_text(prop: IntProperty | BoolProperty | ChoiceProperty) -> str:
    """The default of an interpreted property as its stored text would be."""
    if isinstance(prop, BoolProperty):
        return "true" if prop.default else "false"
    return str(prop.default)


def check_not_reserved(key: str) -> None:
    """Refuse (exit 2) a key derived from metadata (Java's ``TableProperties.RESERVED_PROPERTIES``):
    it is never stored as a property; say which command changes what it names."""
    if key in RESERVED_PROPERTIES:
        where = _RESERVED_POINTERS.get(key, "it is derived from the table metadata; "
                                            "icectl inspect table TABLE shows it")
        raise UsageError(f"{key} is a reserved table property, not stored in properties: {where}")


def check_property_value(key: str, value: str) -> None:
    """Refuse (:class:`UsageError`, exit 2) setting ``key`` to ``value`` when ``key`` is reserved
    or a property icectl interprets and ``value`` is not one it (and Java) would read as meant:
    integers in Java's range and icectl's minimum, booleans ``true``/``false`` only, the codec and
    file format names; the table's own folders (``write.data.path``, ...) absolute paths or URIs.
    Other keys take any text."""
    if not key or key != key.strip():
        raise UsageError(f"table property key {key!r} is empty or starts or ends with blanks")
    check_not_reserved(key)
    prop = INTERPRETED_PROPERTIES.get(key)
    if prop is not None:
        prop.check(value)
    if key in OWN_PATH_PROPERTIES and not re.match(r"/|[A-Za-z][A-Za-z0-9+.-]*:/", value):
        # A relative path would name a different place for every reader and writer, and the
        # delete fence (table/delete_fence.py) counts these folders as the table's own.
        raise UsageError(f"{key}={value!r} is not an absolute path or URI (s3://bucket/path, /data/path)")
