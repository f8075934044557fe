"""Table properties (spec "Table Metadata": ``properties``, "used to control settings that affect
reading and writing"): the names and defaults icectl reads, as Iceberg Java's ``TableProperties``
(1.10) spells them, with one parser per kind.

A property is read where it is used, not when the table is loaded, so a bad value only fails the
command that needs it. Every bad value is the table's fault, not the command line's: it raises
:class:`~icectl.errors.CorruptInputError` (exit code 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from icectl.errors import CorruptInputError


@dataclass(frozen=True)
class IntProperty:
    """An integer (Java int or long) property; ``minimum``: smaller values are bad values."""

    name: str
    default: int
    minimum: int | None = None
    hint: str | None = None  # extra advice after "fix or remove it"

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


# Commits (SnapshotProducer / Tasks.exponentialBackoff).
COMMIT_NUM_RETRIES = IntProperty("commit.retry.num-retries", 4)
COMMIT_MIN_RETRY_WAIT_MS = IntProperty("commit.retry.min-wait-ms", 100)
COMMIT_MAX_RETRY_WAIT_MS = IntProperty("commit.retry.max-wait-ms", 60_000)
COMMIT_TOTAL_RETRY_TIME_MS = IntProperty("commit.retry.total-timeout-ms", 1_800_000)
COMMIT_PROPERTIES = (COMMIT_NUM_RETRIES, COMMIT_MIN_RETRY_WAIT_MS, COMMIT_MAX_RETRY_WAIT_MS,
                     COMMIT_TOTAL_RETRY_TIME_MS)

# Manifests (RewriteManifests' target size).
MANIFEST_TARGET_SIZE_BYTES = IntProperty("commit.manifest.target-size-bytes", 8 * 1024 * 1024, minimum=1,
                                         hint="or pass --target-size")

# Metadata files (TableMetadata.Builder, CatalogUtil.deleteRemovedMetadataFiles, TableMetadataParser).
METADATA_PREVIOUS_VERSIONS_MAX = IntProperty("write.metadata.previous-versions-max", 100)
METADATA_DELETE_AFTER_COMMIT = BoolProperty("write.metadata.delete-after-commit.enabled", False)
METADATA_COMPRESSION = "write.metadata.compression-codec"  # none | gzip

# Snapshot retention (RemoveSnapshots).
GC_ENABLED = BoolProperty("gc.enabled", True)
MAX_SNAPSHOT_AGE_MS = IntProperty("history.expire.max-snapshot-age-ms", 5 * 24 * 60 * 60 * 1000)
MIN_SNAPSHOTS_TO_KEEP = IntProperty("history.expire.min-snapshots-to-keep", 1)
MAX_REF_AGE_MS = IntProperty("history.expire.max-ref-age-ms", (1 << 63) - 1)

# v4 (icectl's layout, design/v4-layout.md): files added by one commit above this many go into a
# new leaf instead of the root.
V4_ROOT_MAX_ADDED_FILES = IntProperty("write.v4.root-max-added-files", 50)

# Where the table's own files go (LocationProvider); the last two are deprecated spellings of
# write.data.path.
WRITE_DATA_PATH = "write.data.path"
WRITE_METADATA_PATH = "write.metadata.path"
OWN_PATH_PROPERTIES = (WRITE_DATA_PATH, WRITE_METADATA_PATH, "write.object-storage.path",
                       "write.folder-storage.path")

# Reading files without field ids (spec "Column Projection").
DEFAULT_NAME_MAPPING = "schema.name-mapping.default"

# TableProperties.RESERVED_PROPERTIES: derived from metadata, never stored as properties.
FORMAT_VERSION_PROPERTY = "format-version"
RESERVED_PROPERTIES = frozenset({
    FORMAT_VERSION_PROPERTY, "uuid", "snapshot-count", "current-snapshot-id", "current-snapshot-summary",
    "current-snapshot-timestamp-ms", "current-schema", "default-partition-spec", "default-sort-order",
})
