"""The v4 ``tracked_file`` schema: every field id icectl writes, and every choice where the merged
spec text (apache/iceberg#16025, 2026-10-14) is not settled, in this one module.

``docs/v4.md`` lists each choice with its source; a later correction of the spec is a change here.

Choices (the shared reference page's open questions):

* Q1 ``manifest_info`` id 521: ``format_version`` (required int, 0 = pre-v4 manifest, 4 = v4), as
  Java's #18418 (2026-10-09, "matching the spec") made it. ``replaced_rows_count``, which had
  521 in the PR head, is not written; neither are 524/525 (modified counts, PR head only, not
  in Java). ``replaced_files_count`` keeps 520.
* Q2 ``dv_cardinality`` (523) is not written (Java dropped it on 2026-09-16; the Mumbling header
  carries the cardinality), and ignored when read.
* Q3 file counts (504-506, 520) are ``int`` (Java), row counts ``long``.
* Q4 manifests are written as Parquet (Java writes Parquet from v4); Avro ``tracked_file``
  manifests are not read (no writer makes them).
* Q5 ``partition`` (102) is the union of every spec's partition fields by field id, all
  optional (Java ``Partitioning.partitionType``); omitted when no spec has a field.
* Q6 ``latest_column_file_snapshot_id`` (160) is not written; column files (158) are refused on read.
* Q7 ``spec_id`` is written on manifest entries (icectl writes single-spec leaves).
* Q8 ``record_count`` of a manifest entry is the number of rows in the manifest file (the Java
  adapter's meaning), not the data rows it tracks.
* Q9 ``content_stats`` are written for data files and not for manifest entries.
* Q10 root entries always carry snapshot id and sequence numbers; a reader accepts an ADDED
  root row without them (inherited from the snapshot).
* Q11 a root entry carried forward unchanged is EXISTING with 6/7 null; ``manifest_info.dv`` and
  ``modified_snapshot_id`` stay.
* File names: manifests ``<uuid>-m<N>.parquet`` (Java), roots ``root-<snapshot id>-<uuid>.parquet``.
* Parquet writer settings as Java's internal Parquet writer: gzip, no Arrow schema in the footer.
"""

from __future__ import annotations

# ----------------------------------------------------------------- tracked_file (top level)
TRACKING = 147
CONTENT_TYPE = 134
LOCATION = 100
FILE_FORMAT = 101
RECORD_COUNT = 103
FILE_SIZE_IN_BYTES = 104
SPEC_ID = 141
PARTITION = 102
CONTENT_STATS = 146
SORT_ORDER_ID = 140
DELETION_VECTOR = 148
MANIFEST_INFO = 150
KEY_METADATA = 131
SPLIT_OFFSETS, SPLIT_OFFSETS_ELEMENT = 132, 133
EQUALITY_IDS, EQUALITY_IDS_ELEMENT = 135, 136
COLUMN_FILES = 158  # refused on read (Q6)
REMOVED_FORMAT_VERSION = 157  # was on tracked_file until #18418; refused on read

# ----------------------------------------------------------------- tracking (147)
STATUS = 0
SNAPSHOT_ID = 1
SEQUENCE_NUMBER = 3
FILE_SEQUENCE_NUMBER = 4
MODIFIED_SNAPSHOT_ID = 5
FIRST_ROW_ID = 142
DELETED_POSITIONS = 6
REPLACED_POSITIONS = 7

# ----------------------------------------------------------------- deletion_vector (148)
DV_LOCATION = 155
DV_OFFSET = 144
DV_SIZE_IN_BYTES = 145
DV_CARDINALITY = 156
DV_KEY_METADATA = 149

# ----------------------------------------------------------------- manifest_info (150)
ADDED_FILES_COUNT = 504
EXISTING_FILES_COUNT = 505
DELETED_FILES_COUNT = 506
REPLACED_FILES_COUNT = 520
ADDED_ROWS_COUNT = 512
EXISTING_ROWS_COUNT = 513
DELETED_ROWS_COUNT = 514
MIN_SEQUENCE_NUMBER = 516
MANIFEST_FORMAT_VERSION = 521  # Q1
MANIFEST_DV = 522
MANIFEST_DV_CARDINALITY = 523  # Q2: read only

# ----------------------------------------------------------------- content_stats (146)
STATS_BASE = 10_000
STATS_STRIDE = 200
MAX_STATS_FIELD_ID = 999_950  # exclusive
LOWER_BOUND, UPPER_BOUND, TIGHT_BOUNDS, VALUE_COUNT, NULL_VALUE_COUNT, NAN_VALUE_COUNT = 1, 2, 3, 4, 5, 6


def stats_struct_id(field_id: int) -> int:
    """The id of column ``field_id``'s stats struct in ``content_stats``."""
    return STATS_BASE + STATS_STRIDE * field_id


def stats_field_of(struct_id: int) -> int | None:
    """The column id a stats struct id belongs to (None: not a column's struct)."""
    rel = struct_id - STATS_BASE
    if rel < 0 or rel % STATS_STRIDE:
        return None
    return rel // STATS_STRIDE


# ----------------------------------------------------------------- file-level
KV_SCHEMA_ID = "schema-id"
KV_FORMAT_VERSION = "format-version"
RECORD_NAME = "tracked_file"  # informational: pyarrow names a Parquet file's root group "schema"
MANIFEST_SUFFIX = ".parquet"
PARQUET_COMPRESSION = "gzip"
