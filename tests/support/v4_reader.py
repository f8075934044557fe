"""An independent reader of Iceberg tables, v1-v3 and v4 as the spec merged it (2026-10-14), to
judge what icectl writes. It imports nothing from icectl: it is written from the spec text
(tracked_file field ids, Mumbling, Puffin deletion vectors, the v3 delete rules), reads Parquet
manifests by field id with pyarrow, Avro with fastavro, and has its own Mumbling decoder.

* ``live_data_files(metadata_json)``: every live data file of the current (or a given) snapshot
  with the row positions deleted from it (colocated DV, carried-over v2/v3 DVs and position
  delete files, applied by the v3 sequence-number rules);
* ``live_rows(metadata_json)``: those files' rows minus the deleted positions, in the current
  schema's columns (by field id), sorted, as a pyarrow table.

Not supported (raises NotImplementedError): equality deletes, column files, encrypted files,
object stores (local paths and ``file:`` URIs only).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

LIVE = (0, 1, 4)  # EXISTING, ADDED, MODIFIED
FIELD_ID = b"PARQUET:field_id"
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])


# --------------------------------------------------------------------------- paths


def local(path: str) -> str:
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return path[len(prefix):]
    if "://" in path:
        raise NotImplementedError(f"only local files: {path}")
    return path


def resolve(location: str, path: str) -> str:
    """The spec's path resolution: a path without a scheme that is not absolute is relative to the
    table location (no normalisation)."""
    if "://" in path or path.startswith(("file:", "/")):
        return local(path)
    return local(location) + "/" + path


# --------------------------------------------------------------------------- Mumbling (own decoder)


def _unpack(data: bytes, count: int, width: int) -> list[int]:
    if width == 0:
        return [0] * count
    bits = "".join(f"{b:08b}" for b in data)
    return [int(bits[i * width:(i + 1) * width], 2) for i in range(count)]


def mumbling_positions(data: bytes) -> set[int]:
    """A Mumbling v1 bitmap's positions (the spec's layout, section by section)."""
    if len(data) < 6 or data[0] != 1:
        raise ValueError("not a Mumbling v1 bitmap")
    cardinality = int.from_bytes(data[1:4], "little")
    containers = int.from_bytes(data[4:6], "little")
    if containers > 8192:
        raise ValueError("too many containers")
    descriptors: list[int] = []
    pos = 6
    while len(descriptors) < containers:
        n = min(256, containers - len(descriptors))
        b1, b2, e, m = data[pos] & 15, data[pos] >> 4, data[pos + 1], data[pos + 2]
        pos += 3
        nb = (n * b1 + 7) // 8
        values = _unpack(data[pos:pos + nb], n, b1)
        pos += nb
        offsets = list(data[pos:pos + e])
        pos += e
        eb = (e * b2 + 7) // 8
        highs = _unpack(data[pos:pos + eb], e, b2)
        pos += eb
        for i, hi in zip(offsets, highs, strict=True):
            values[i] |= hi << b1
        descriptors.extend(v + m for v in values)
    out: set[int] = set()
    for k, d in enumerate(descriptors):
        if d >> 5 == 0:
            out.update((k << 8) + q for q in data[pos:pos + d])
            pos += d
        elif d >> 5 == 1:
            for i, byte in enumerate(data[pos:pos + 32]):
                for j in range(8):
                    if byte & (0x80 >> j):
                        out.add((k << 8) + i * 8 + j)
            pos += 32
        else:
            raise ValueError("reserved descriptor bits")
    if pos != len(data) or len(out) != cardinality:
        raise ValueError("Mumbling bitmap length or cardinality is wrong")
    return out


# --------------------------------------------------------------------------- Puffin DV blobs


def dv_positions(path: str, offset: int, length: int) -> set[int]:
    """A ``deletion-vector-v1`` blob: big-endian length, magic, portable Roaring, big-endian CRC-32."""
    with open(local(path), "rb") as f:
        f.seek(offset)
        blob = f.read(length)
    (size,) = struct.unpack(">I", blob[:4])
    if blob[4:8] != DV_MAGIC or size != len(blob) - 8:
        raise ValueError(f"not a deletion vector blob in {path}@{offset}")
    (crc,) = struct.unpack(">I", blob[-4:])
    if zlib.crc32(blob[4:-4]) != crc:
        raise ValueError(f"bad DV CRC in {path}@{offset}")
    return set(BitMap64.deserialize(blob[8:-4]))


# --------------------------------------------------------------------------- Parquet tracked_file


def _by_id(value: Any, pa_field: pa.Field) -> Any:
    if value is None:
        return None
    t = pa_field.type
    if pa.types.is_struct(t):
        return {_fid(f): _by_id(value[f.name], f) for f in t}
    if pa.types.is_list(t):
        return [_by_id(v, t.value_field) for v in value]
    return value


def _fid(f: pa.Field) -> int:
    meta = f.metadata or {}
    if FIELD_ID not in meta:
        raise ValueError(f"Parquet field {f.name} has no field id: not a spec v4 manifest")
    return int(meta[FIELD_ID])


def tracked_files(path: str) -> list[dict[int, Any]]:
    """Every row of a v4 Parquet manifest, in file order, keyed by field id."""
    table = pq.read_table(local(path))
    fields = list(table.schema)
    ids = [_fid(f) for f in fields]
    if len(set(ids)) != len(ids):
        raise ValueError(f"colliding field ids in {path}")
    return [{_fid(f): _by_id(row[f.name], f) for f in fields} for row in table.to_pylist()]


def _format_version(info: dict[int, Any]) -> int:
    # manifest_info.format_version: id 521 per Java #18418 (the text's id is an open question).
    return int(info[521])


# --------------------------------------------------------------------------- the reader


@dataclass
class _Data:
    path: str
    seq: int
    spec_id: int
    partition: Any
    dv: set[int] | None = None  # a colocated DV


@dataclass
class _State:
    location: str
    data: dict[str, _Data] = field(default_factory=dict)
    dvs: list[tuple[str, int, set[int]]] = field(default_factory=list)  # (data file, seq, positions)
    pos_files: list[tuple[str, int]] = field(default_factory=list)  # (position delete file, seq)


def _avro(path: str) -> list[dict[str, Any]]:
    with open(local(path), "rb") as f:
        return list(fastavro.reader(f))


def _v3_manifest(st: _State, path: str, seq: int, snapshot_id: int | None, removed: set[int],
                 content: int) -> None:
    for i, r in enumerate(_avro(path)):
        if i in removed or r["status"] == 2:
            continue
        f = r["data_file"]
        s = r.get("sequence_number")
        if s is None:
            s = seq  # ADDED rows inherit the manifest's (v1: 0)
        file_content = f.get("content", 0)
        if file_content == 0:
            st.data[resolve(st.location, f["file_path"])] = _Data(resolve(st.location, f["file_path"]), s,
                                                                  0, f.get("partition"))
        elif file_content == 1:
            if f.get("file_format", "").lower() == "puffin":
                st.dvs.append((resolve(st.location, f["referenced_data_file"]), s,
                               dv_positions(resolve(st.location, f["file_path"]), f["content_offset"],
                                            f["content_size_in_bytes"])))
            else:
                st.pos_files.append((resolve(st.location, f["file_path"]), s))
        else:
            raise NotImplementedError("equality deletes")
    del content, snapshot_id


def _v4_root(st: _State, root: str, snapshot: dict[str, Any]) -> None:
    for e in tracked_files(root):
        t, content = e[147], e[134]
        if content in (1, 5) or content not in (0, 2, 3, 4):
            raise ValueError(f"content_type {content} in a v4 root")
        if e.get(158):
            raise NotImplementedError("column files")
        if t[0] not in LIVE:
            continue
        seq = t.get(3) if t.get(3) is not None else snapshot["sequence-number"]
        path = resolve(st.location, e[100])
        if content == 0:
            dv = e.get(148)
            st.data[path] = _Data(path, seq, e.get(141) or 0, e.get(102),
                                  None if dv is None else dv_positions(resolve(st.location, dv[155]), dv[144],
                                                                       dv[145]))
            continue
        if content == 2:
            raise NotImplementedError("equality deletes")
        info = e[150]
        removed = mumbling_positions(info[522]) if info.get(522) is not None else set()
        if _format_version(info) == 0:
            _v3_manifest(st, path, seq, t.get(1), removed, content)
            continue
        for i, row in enumerate(tracked_files(path)):  # a v4 leaf: data files only
            rt = row[147]
            if i in removed or rt[0] not in LIVE:
                continue
            if row[134] != 0:
                raise ValueError(f"content_type {row[134]} in a v4 leaf")
            rseq = rt.get(3) if rt.get(3) is not None else seq
            dv = row.get(148)
            p = resolve(st.location, row[100])
            st.data[p] = _Data(p, rseq, row.get(141) or 0, row.get(102),
                               None if dv is None else dv_positions(resolve(st.location, dv[155]), dv[144], dv[145]))


def _snapshot(md: dict[str, Any], snapshot_id: int | None) -> dict[str, Any] | None:
    sid = md.get("current-snapshot-id") if snapshot_id is None else snapshot_id
    return next((s for s in md.get("snapshots", []) if s["snapshot-id"] == sid), None)


def live_data_files(metadata_path: str | Path, snapshot_id: int | None = None) -> dict[str, set[int]]:
    """Every live data file of a snapshot -> the positions deleted from it."""
    md = json.loads(Path(local(str(metadata_path))).read_text())
    snap = _snapshot(md, snapshot_id)
    if snap is None:
        return {}
    st = _State(md["location"])
    if snap.get("root-manifest"):
        _v4_root(st, resolve(st.location, snap["root-manifest"]), snap)
    else:
        for m in _avro(resolve(st.location, snap["manifest-list"])):
            _v3_manifest(st, resolve(st.location, m["manifest_path"]), m.get("sequence_number", 0),
                         m.get("added_snapshot_id"), set(), m.get("content", 0))
    out: dict[str, set[int]] = {}
    pos_rows: dict[str, list[tuple[int, int]]] = {}  # data file -> (pos, delete seq)
    for path, seq in st.pos_files:
        t = pq.read_table(local(path), columns=["file_path", "pos"]).to_pydict()
        for fp, pos in zip(t["file_path"], t["pos"], strict=True):
            pos_rows.setdefault(resolve(st.location, fp), []).append((pos, seq))
    for path, d in st.data.items():
        if d.dv is not None:  # a colocated DV applies to its own entry, no other check
            out[path] = set(d.dv)
            continue
        deleted: set[int] = set()
        dvs = [p for target, s, p in st.dvs if target == path and s >= d.seq]
        for p in dvs:
            deleted |= p
        if not dvs:
            deleted |= {pos for pos, s in pos_rows.get(path, []) if s >= d.seq}
        out[path] = deleted
    return out


def live_rows(metadata_path: str | Path, snapshot_id: int | None = None) -> pa.Table:
    """The live rows of a snapshot, columns of the current schema (by field id), sorted."""
    md = json.loads(Path(local(str(metadata_path))).read_text())
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    columns = [(f["id"], f["name"]) for f in schema["fields"]]
    parts = []
    for path, deleted in sorted(live_data_files(metadata_path, snapshot_id).items()):
        table = pq.read_table(local(path))
        by_id = {int(f.metadata[FIELD_ID]): f.name for f in table.schema if f.metadata and FIELD_ID in f.metadata}
        picked = []
        for fid, name in columns:
            source = by_id.get(fid, name if name in table.column_names else None)
            picked.append(table.column(source) if source is not None else pa.nulls(table.num_rows))
        t = pa.Table.from_arrays(picked, names=[n for _, n in columns])
        if deleted:
            mask = pa.array([i not in deleted for i in range(t.num_rows)])
            t = t.filter(mask)
        parts.append(t.cast(parts[0].schema) if parts and t.schema != parts[0].schema else t)
    if not parts:
        return pa.table({name: pa.array([]) for _, name in columns})
    out = pa.concat_tables(parts, promote_options="permissive")
    keys = [(name, "ascending") for _, name in columns if not pa.types.is_nested(out.schema.field(name).type)]
    return out.sort_by(keys)


def rows_as_tuples(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples (for comparing with Spark's ``collect()``)."""
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return sorted(zip(*cols, strict=True), key=repr) if cols else []


__all__ = ["dv_positions", "live_data_files", "live_rows", "mumbling_positions", "pc", "resolve", "rows_as_tuples",
           "tracked_files"]
