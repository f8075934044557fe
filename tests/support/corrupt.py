"""Break a copy of a real Spark-written table in one precise way, for ``icectl validate`` rule tests.

:func:`copy_table` copies a fixture table to a private directory, rewriting its absolute paths
(:func:`support.relocate.relocate_table` with a local destination). The ``edit_*`` helpers then change
one thing: a key of the current metadata JSON, a field of a manifest list or manifest record
(re-encoded with the file's own writer schema, codec and metadata, so every other byte of
meaning stays), or bytes of a Puffin file. Editing a manifest fixes ``manifest_length`` in every
manifest list naming it, so only the intended rule breaks.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.storage import FileIO
from icectl.table.scan import manifests_of
from support.relocate import read_raw_avro, relocate_table, write_avro

Records = list[dict[str, Any]]


def _put(url: str, data: bytes) -> None:
    p = Path(url)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def copy_table(src: Path, dst: Path) -> Path:
    """A private copy of the table directory ``src`` at ``dst`` (every path in it rewritten, DV
    Puffin footers included: see :func:`support.relocate.relocate_table`)."""
    relocate_table(Path(src), str(dst), _put)
    return dst


def metadata_path(table_dir: Path) -> Path:
    """The current metadata JSON (by version-hint.text)."""
    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    return table_dir / "metadata" / f"v{version}.metadata.json"


def read_metadata(table_dir: Path) -> dict[str, Any]:
    return json.loads(metadata_path(table_dir).read_text())


def edit_metadata(table_dir: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """Apply ``edit`` to the current metadata JSON document in place; returns the file."""
    path = metadata_path(table_dir)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def table_metadata(table_dir: Path) -> TableMetadata:
    return TableMetadata.from_json(read_metadata(table_dir))


def current_list(table_dir: Path) -> str:
    md = table_metadata(table_dir)
    snap = md.current_snapshot()
    assert snap is not None and snap.manifest_list
    return snap.manifest_list


def current_manifests(table_dir: Path) -> list[ManifestFile]:
    md = table_metadata(table_dir)
    snap = md.current_snapshot()
    assert snap is not None
    return manifests_of(md, snap, FileIO())


def read_avro(path: str | Path) -> tuple[dict[str, Any], dict[str, bytes], Records]:
    """(writer schema, key-value metadata, records with logical types not applied)."""
    schema, meta, _sync, records = read_raw_avro(Path(path).read_bytes())
    return schema, meta, records


def edit_avro(path: str | Path, edit: Callable[[dict[str, Any], dict[str, bytes], Records], None]) -> int:
    """Apply ``edit(schema, metadata, records)`` in place, re-encode; returns the new size."""
    schema, meta, sync, records = read_raw_avro(Path(path).read_bytes())
    edit(schema, meta, records)
    data = write_avro(schema, meta, sync, records)
    Path(path).write_bytes(data)
    return len(data)


def edit_manifest_list(path: str | Path, edit: Callable[[Records], None]) -> str:
    edit_avro(path, lambda _s, _m, records: edit(records))
    return str(path)


def edit_manifest(table_dir: Path, manifest_path: str,
                  edit: Callable[[dict[str, Any], dict[str, bytes], Records], None]) -> str:
    """Edit one manifest, then set its new length in every manifest list that names it."""
    size = edit_avro(manifest_path, edit)
    for candidate in (table_dir / "metadata").glob("snap-*.avro"):
        _s, _m, records = read_avro(candidate)
        if any(r["manifest_path"] == manifest_path for r in records):
            def fix(rs: Records) -> None:
                for r in rs:
                    if r["manifest_path"] == manifest_path:
                        r["manifest_length"] = size
            edit_manifest_list(candidate, fix)
    return manifest_path


def entry_records(manifest_path: str) -> Records:
    return read_avro(manifest_path)[2]


def find_entry(table_dir: Path, predicate: Callable[[ManifestFile, dict[str, Any]], bool]) -> tuple[str, int]:
    """(manifest path, ordinal) of the first entry of the current snapshot matching ``predicate``."""
    for m in current_manifests(table_dir):
        for i, rec in enumerate(entry_records(m.manifest_path)):
            if predicate(m, rec):
                return m.manifest_path, i
    raise AssertionError("no entry in the current snapshot matches")


def edit_entry(table_dir: Path, manifest_path: str, ordinal: int, edit: Callable[[dict[str, Any]], None]) -> str:
    def apply(_schema: dict[str, Any], _meta: dict[str, bytes], records: Records) -> None:
        edit(records[ordinal])
    return edit_manifest(table_dir, manifest_path, apply)


def set_manifest_key(table_dir: Path, manifest_path: str, key: str, value: str | None) -> str:
    """Set (or with ``None`` remove) one key of a manifest's Avro key-value metadata."""
    def apply(_schema: dict[str, Any], meta: dict[str, bytes], _records: Records) -> None:
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value.encode()
    return edit_manifest(table_dir, manifest_path, apply)


def bounds(rec: dict[str, Any], which: str) -> dict[int, bytes]:
    """``lower_bounds``/``upper_bounds`` of a raw entry record as a dict."""
    return {kv["key"]: kv["value"] for kv in rec["data_file"].get(which) or []}


def set_bounds(rec: dict[str, Any], which: str, values: dict[int, bytes]) -> None:
    rec["data_file"][which] = [{"key": k, "value": v} for k, v in values.items()]


def avro_bytes(schema: dict[str, Any], records: Records) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, schema, records)
    return out.getvalue()
