"""Snapshots, refs, log entries, statistics files and encryption keys (spec "Snapshots",
"Snapshot References", "Table Statistics", "Partition Statistics", "Encryption Keys").

Every object keeps unknown JSON keys and writes its keys in the order Java's parsers do
(``SnapshotParser``, ``SnapshotRefParser``, ``StatisticsFileParser``, ...), so a file written by
Java is written back unchanged. The small ``req_*``/``opt_*`` readers are shared with
:mod:`icectl.spec.metadata` so every missing-field error names the field the same way.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from icectl.errors import CorruptInputError

MAIN_BRANCH = "main"
RefType = Literal["branch", "tag"]

Extra = tuple[tuple[str, Any], ...]  # unknown JSON keys in file order, written back last


# ---------------------------------------------------------------------------------------------
# JSON readers: each names the missing or mistyped field in its error


def _require(obj: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in obj:
        raise CorruptInputError(f"{what} is missing required field {key!r}")
    return obj[key]


def _check_int(value: Any, key: str, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptInputError(f"{what} field {key!r} must be an integer, got {value!r}")
    return value


def req_int(obj: Mapping[str, Any], key: str, what: str) -> int:
    return _check_int(_require(obj, key, what), key, what)


def opt_int(obj: Mapping[str, Any], key: str, what: str) -> int | None:
    value = obj.get(key)
    return None if value is None else _check_int(value, key, what)


def req_str(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = _require(obj, key, what)
    if not isinstance(value, str):
        raise CorruptInputError(f"{what} field {key!r} must be a string, got {value!r}")
    return value


def opt_str(obj: Mapping[str, Any], key: str, what: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise CorruptInputError(f"{what} field {key!r} must be a string, got {value!r}")
    return value


def str_map(obj: Mapping[str, Any], key: str, what: str) -> dict[str, str]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise CorruptInputError(f"{what} field {key!r} must be an object of strings, got {value!r}")
    return dict(value)


def obj_list(obj: Mapping[str, Any], key: str, what: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise CorruptInputError(f"{what} field {key!r} must be a list, got {value!r}")
    return value


def as_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CorruptInputError(f"{what} must be a JSON object, got {value!r}")
    return value


def extra_keys(obj: Mapping[str, Any], known: set[str]) -> Extra:
    return tuple((k, v) for k, v in obj.items() if k not in known)


# ---------------------------------------------------------------------------------------------
# Snapshots

_SNAPSHOT_KEYS = {"sequence-number", "snapshot-id", "parent-snapshot-id", "timestamp-ms", "summary",
                  "manifest-list", "manifests", "root-manifest", "schema-id", "first-row-id",
                  "added-rows", "key-id"}


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    timestamp_ms: int
    parent_snapshot_id: int | None = None
    sequence_number: int = 0  # v1 snapshots have none: Appendix E says read it as 0
    manifest_list: str | None = None
    manifests: tuple[str, ...] | None = None  # v1 only: manifest paths embedded in the JSON
    root_manifest: str | None = None  # v4 (icectl design): replaces manifest-list
    summary: dict[str, str] = field(default_factory=dict)
    schema_id: int | None = None
    first_row_id: int | None = None  # v3 row lineage
    added_rows: int | None = None
    key_id: str | None = None
    extra: Extra = ()
    # Java writes sequence-number only when > 0; remember an explicit 0 so it round-trips.
    has_sequence_number: bool = field(default=False, compare=False)

    @property
    def operation(self) -> str | None:
        return self.summary.get("operation")

    @classmethod
    def from_json(cls, obj: Any) -> Snapshot:
        obj = as_object(obj, "snapshot")
        what = f"snapshot {obj.get('snapshot-id', '?')}"
        manifests = obj.get("manifests")
        if manifests is not None and (not isinstance(manifests, list)
                                      or not all(isinstance(m, str) for m in manifests)):
            raise CorruptInputError(f"{what} field 'manifests' must be a list of strings")
        snapshot = cls(
            snapshot_id=req_int(obj, "snapshot-id", "snapshot"),
            timestamp_ms=req_int(obj, "timestamp-ms", what),
            parent_snapshot_id=opt_int(obj, "parent-snapshot-id", what),
            sequence_number=opt_int(obj, "sequence-number", what) or 0,
            manifest_list=opt_str(obj, "manifest-list", what),
            manifests=tuple(manifests) if manifests is not None else None,
            root_manifest=opt_str(obj, "root-manifest", what),
            summary=str_map(obj, "summary", what),
            schema_id=opt_int(obj, "schema-id", what),
            first_row_id=opt_int(obj, "first-row-id", what),
            added_rows=opt_int(obj, "added-rows", what),
            key_id=opt_str(obj, "key-id", what),
            extra=extra_keys(obj, _SNAPSHOT_KEYS),
            has_sequence_number="sequence-number" in obj,
        )
        if snapshot.manifest_list is None and snapshot.manifests is None and snapshot.root_manifest is None:
            raise CorruptInputError(
                f"{what} is missing required field 'manifest-list' (or v1 'manifests', v4 'root-manifest')")
        return snapshot

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.sequence_number > 0 or self.has_sequence_number:
            out["sequence-number"] = self.sequence_number
        out["snapshot-id"] = self.snapshot_id
        if self.parent_snapshot_id is not None:
            out["parent-snapshot-id"] = self.parent_snapshot_id
        out["timestamp-ms"] = self.timestamp_ms
        if self.summary:
            # Java writes operation first, then the rest in map order.
            summary = {"operation": self.summary["operation"]} if "operation" in self.summary else {}
            summary.update((k, v) for k, v in self.summary.items() if k != "operation")
            out["summary"] = summary
        if self.root_manifest is not None:
            out["root-manifest"] = self.root_manifest
        if self.manifest_list is not None:
            out["manifest-list"] = self.manifest_list
        elif self.root_manifest is None:
            out["manifests"] = list(self.manifests or ())  # as Java: the embedded list, even empty
        if self.schema_id is not None:
            out["schema-id"] = self.schema_id
        if self.first_row_id is not None:
            out["first-row-id"] = self.first_row_id
        if self.added_rows is not None:
            out["added-rows"] = self.added_rows
        if self.key_id is not None:
            out["key-id"] = self.key_id
        out.update(self.extra)
        return out


def ancestors_of(snapshot_id: int | None, snapshots_by_id: Mapping[int, Snapshot]) -> Iterator[Snapshot]:
    """The snapshot itself, then its parent, grandparent, ... while they are still in the table.

    Stops at the first parent that is missing (expired) and guards against a corrupt cycle.
    """
    seen: set[int] = set()
    current = snapshots_by_id.get(snapshot_id) if snapshot_id is not None else None
    while current is not None and current.snapshot_id not in seen:
        seen.add(current.snapshot_id)
        yield current
        parent = current.parent_snapshot_id
        current = snapshots_by_id.get(parent) if parent is not None else None


def is_ancestor_of(snapshot_id: int, ancestor_id: int, snapshots_by_id: Mapping[int, Snapshot]) -> bool:
    """True if ``ancestor_id`` is ``snapshot_id`` or one of its (still present) ancestors."""
    return any(s.snapshot_id == ancestor_id for s in ancestors_of(snapshot_id, snapshots_by_id))


# ---------------------------------------------------------------------------------------------
# Refs and logs

_REF_KEYS = {"snapshot-id", "type", "min-snapshots-to-keep", "max-snapshot-age-ms", "max-ref-age-ms"}


@dataclass(frozen=True)
class SnapshotRef:
    snapshot_id: int
    type: RefType = "branch"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None
    extra: Extra = ()

    @property
    def is_branch(self) -> bool:
        return self.type == "branch"

    @classmethod
    def from_json(cls, obj: Any, name: str = "?") -> SnapshotRef:
        what = f"ref {name!r}"
        obj = as_object(obj, what)
        ref_type = req_str(obj, "type", what).lower()  # Java's SnapshotRefType is case-insensitive
        if ref_type not in ("branch", "tag"):
            raise CorruptInputError(f"{what} field 'type' must be 'branch' or 'tag', got {obj['type']!r}")
        return cls(
            snapshot_id=req_int(obj, "snapshot-id", what),
            type="branch" if ref_type == "branch" else "tag",  # checked above: one of the two
            min_snapshots_to_keep=opt_int(obj, "min-snapshots-to-keep", what),
            max_snapshot_age_ms=opt_int(obj, "max-snapshot-age-ms", what),
            max_ref_age_ms=opt_int(obj, "max-ref-age-ms", what),
            extra=extra_keys(obj, _REF_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id, "type": self.type}
        if self.min_snapshots_to_keep is not None:
            out["min-snapshots-to-keep"] = self.min_snapshots_to_keep
        if self.max_snapshot_age_ms is not None:
            out["max-snapshot-age-ms"] = self.max_snapshot_age_ms
        if self.max_ref_age_ms is not None:
            out["max-ref-age-ms"] = self.max_ref_age_ms
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class SnapshotLogEntry:
    timestamp_ms: int
    snapshot_id: int
    extra: Extra = ()

    @classmethod
    def from_json(cls, obj: Any) -> SnapshotLogEntry:
        obj = as_object(obj, "snapshot-log entry")
        return cls(req_int(obj, "timestamp-ms", "snapshot-log entry"),
                   req_int(obj, "snapshot-id", "snapshot-log entry"),
                   extra_keys(obj, {"timestamp-ms", "snapshot-id"}))

    def to_json(self) -> dict[str, Any]:
        return {"timestamp-ms": self.timestamp_ms, "snapshot-id": self.snapshot_id, **dict(self.extra)}


@dataclass(frozen=True)
class MetadataLogEntry:
    timestamp_ms: int
    metadata_file: str
    extra: Extra = ()

    @classmethod
    def from_json(cls, obj: Any) -> MetadataLogEntry:
        obj = as_object(obj, "metadata-log entry")
        return cls(req_int(obj, "timestamp-ms", "metadata-log entry"),
                   req_str(obj, "metadata-file", "metadata-log entry"),
                   extra_keys(obj, {"timestamp-ms", "metadata-file"}))

    def to_json(self) -> dict[str, Any]:
        return {"timestamp-ms": self.timestamp_ms, "metadata-file": self.metadata_file, **dict(self.extra)}


# ---------------------------------------------------------------------------------------------
# Statistics files

_BLOB_KEYS = {"type", "snapshot-id", "sequence-number", "fields", "properties"}
_STATS_KEYS = {"snapshot-id", "statistics-path", "file-size-in-bytes", "file-footer-size-in-bytes",
               "key-metadata", "blob-metadata"}
_PARTITION_STATS_KEYS = {"snapshot-id", "statistics-path", "file-size-in-bytes"}


@dataclass(frozen=True)
class BlobMetadata:
    """One blob of a table statistics (Puffin) file, as listed in table metadata."""

    type: str
    snapshot_id: int
    sequence_number: int
    fields: tuple[int, ...]
    properties: dict[str, str] = field(default_factory=dict)
    extra: Extra = ()
    has_properties: bool = field(default=False, compare=False)  # Java omits an empty map

    @classmethod
    def from_json(cls, obj: Any) -> BlobMetadata:
        what = "statistics blob-metadata"
        obj = as_object(obj, what)
        fields = _require(obj, "fields", what)
        if not isinstance(fields, list):
            raise CorruptInputError(f"{what} field 'fields' must be a list of ints, got {fields!r}")
        return cls(req_str(obj, "type", what), req_int(obj, "snapshot-id", what),
                   req_int(obj, "sequence-number", what),
                   tuple(_check_int(f, "fields", what) for f in fields),
                   str_map(obj, "properties", what), extra_keys(obj, _BLOB_KEYS), "properties" in obj)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "snapshot-id": self.snapshot_id,
                               "sequence-number": self.sequence_number, "fields": list(self.fields)}
        if self.properties or self.has_properties:
            out["properties"] = dict(self.properties)
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class StatisticsFile:
    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    file_footer_size_in_bytes: int
    blob_metadata: tuple[BlobMetadata, ...] = ()
    key_metadata: str | None = None  # base64, as stored
    extra: Extra = ()

    @classmethod
    def from_json(cls, obj: Any) -> StatisticsFile:
        what = "statistics file"
        obj = as_object(obj, what)
        blobs = _require(obj, "blob-metadata", what)
        if not isinstance(blobs, list):
            raise CorruptInputError(f"{what} field 'blob-metadata' must be a list, got {blobs!r}")
        return cls(req_int(obj, "snapshot-id", what), req_str(obj, "statistics-path", what),
                   req_int(obj, "file-size-in-bytes", what), req_int(obj, "file-footer-size-in-bytes", what),
                   tuple(BlobMetadata.from_json(b) for b in blobs), opt_str(obj, "key-metadata", what),
                   extra_keys(obj, _STATS_KEYS))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id, "statistics-path": self.statistics_path,
                               "file-size-in-bytes": self.file_size_in_bytes,
                               "file-footer-size-in-bytes": self.file_footer_size_in_bytes}
        if self.key_metadata is not None:
            out["key-metadata"] = self.key_metadata
        out["blob-metadata"] = [b.to_json() for b in self.blob_metadata]
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class PartitionStatisticsFile:
    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    extra: Extra = ()

    @classmethod
    def from_json(cls, obj: Any) -> PartitionStatisticsFile:
        what = "partition statistics file"
        obj = as_object(obj, what)
        return cls(req_int(obj, "snapshot-id", what), req_str(obj, "statistics-path", what),
                   req_int(obj, "file-size-in-bytes", what), extra_keys(obj, _PARTITION_STATS_KEYS))

    def to_json(self) -> dict[str, Any]:
        return {"snapshot-id": self.snapshot_id, "statistics-path": self.statistics_path,
                "file-size-in-bytes": self.file_size_in_bytes, **dict(self.extra)}


# ---------------------------------------------------------------------------------------------
# Encryption keys (v3)

_KEY_KEYS = {"key-id", "encrypted-key-metadata", "key-metadata", "encrypted-by-id", "properties"}


@dataclass(frozen=True)
class EncryptedKey:
    key_id: str
    encrypted_key_metadata: str  # base64, as stored
    encrypted_by_id: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    extra: Extra = ()
    # The spec's Appendix C example spells the key "key-metadata"; Java uses the table's name.
    uses_key_metadata_alias: bool = field(default=False, compare=False)
    has_properties: bool = field(default=False, compare=False)

    @property
    def key_metadata_bytes(self) -> bytes:
        return base64.b64decode(self.encrypted_key_metadata)

    @classmethod
    def from_json(cls, obj: Any) -> EncryptedKey:
        what = "encryption key"
        obj = as_object(obj, what)
        alias = "encrypted-key-metadata" not in obj and "key-metadata" in obj
        return cls(req_str(obj, "key-id", what),
                   req_str(obj, "key-metadata" if alias else "encrypted-key-metadata", what),
                   opt_str(obj, "encrypted-by-id", what), str_map(obj, "properties", what),
                   extra_keys(obj, _KEY_KEYS - ({"key-metadata"} if not alias else set())),
                   alias, "properties" in obj)

    def to_json(self) -> dict[str, Any]:
        name = "key-metadata" if self.uses_key_metadata_alias else "encrypted-key-metadata"
        out: dict[str, Any] = {"key-id": self.key_id, name: self.encrypted_key_metadata}
        if self.encrypted_by_id is not None:
            out["encrypted-by-id"] = self.encrypted_by_id
        if self.properties or self.has_properties:
            out["properties"] = dict(self.properties)
        out.update(self.extra)
        return out
