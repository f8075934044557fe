"""Copy an Iceberg table directory to a new location, rewriting every absolute path in it.

Iceberg metadata names files by absolute path (spec: "Table Metadata", "Manifest Lists",
"Manifests"), so a byte copy of a table still points at the original. :func:`relocate_table`
copies and rewrites: metadata JSON, manifest lists and manifests (re-encoded with their own writer
schema, codec, key-value metadata and sync marker) and the Puffin footers of deletion vectors.

* :func:`relocate_table` with an ``fs_put`` writes anywhere (``support.s3`` uploads to moto's S3).
* :func:`copy_table_dir` writes a local copy, keeping the ``file:`` spelling of each path and
  regenerating Hadoop's ``.crc`` sidecars, so Spark's Hadoop catalog reads the copy as a table
  (``spark_clone`` copies fixtures this way instead of rebuilding them with Spark).
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from fastavro.read import HEADER_SCHEMA

from icectl.codec.puffin import MAGIC as PUFFIN_MAGIC
from icectl.codec.puffin import read_puffin_footer

FsPut = Callable[[str, bytes], None]
"""``fs_put(url, data)``: store ``data`` at ``url`` (``s3://bucket/key`` or a local path), replacing
any object. Called from several threads at once (s3fs filesystems are safe for that)."""

# Iceberg field ids of the Avro fields that hold paths or a manifest's length (spec: "Manifests").
_MANIFEST_PATH_ID = 500
_MANIFEST_LENGTH_ID = 501
_DATA_FILE_ID = 2
_FILE_PATH_ID = 100
_REFERENCED_DATA_FILE_ID = 143
_FILE_SIZE_ID = 104
# data_file fields relocation reads or rewrites, by Iceberg field id -> their v2 spec names.
_DATA_FILE_FIELDS = {134: "content", _FILE_PATH_ID: "file_path", 101: "file_format",
                     _FILE_SIZE_ID: "file_size_in_bytes", 108: "column_sizes", 125: "lower_bounds",
                     128: "upper_bounds", 132: "split_offsets",
                     _REFERENCED_DATA_FILE_ID: "referenced_data_file"}
_POSITION_DELETES = 1
_DELETE_FILE_PATH_ID = 2147483546  # the file_path column of a position delete file (spec: "Position Delete Files")

# Keys of the metadata JSON that must name a file of the table (anything else is left alone
# unless it starts with the table location, e.g. write.data.path).
_JSON_PATH_KEYS = {"location", "manifest-list", "manifests", "metadata-file", "statistics-path"}

_METADATA_JSON_SUFFIXES = (".metadata.json", ".metadata.json.gz")


class PathMapper:
    """Maps absolute paths under the source table directory to the destination location.

    Spark writes ``/abs/path``, ``file:/abs/path`` or ``file:///abs/path`` depending on the version
    and catalog; all of them, for the directory as given and as resolved, name the source.  Every
    spelling becomes ``dst``, unless ``keep_scheme`` (``dst`` a plain local directory): then each
    path keeps its own spelling (``file:/src/x`` -> ``file:/dst/x``), as the writer had it.
    """

    def __init__(self, src: Path, dst: str, *, keep_scheme: bool = False) -> None:
        self.dst = dst.rstrip("/")
        dirs = {str(src.absolute()).rstrip("/"), str(src.resolve()).rstrip("/")}
        forms = ("", "file:", "file://")
        # Longest first so "file:///x" wins over a shorter form that is its suffix or prefix.
        self.prefixes = sorted(
            {(f"{form}{d}", f"{form}{self.dst}" if keep_scheme else self.dst) for d in dirs for form in forms},
            key=lambda pair: len(pair[0]), reverse=True)

    def maybe(self, value: str) -> str | None:
        """The relocated path, or None when ``value`` is not under the source directory."""
        for prefix, replacement in self.prefixes:
            if value == prefix:
                return replacement
            if value.startswith(prefix + "/"):
                return replacement + value[len(prefix):]
        return None

    def __call__(self, value: str) -> str:
        out = self.maybe(value)
        if out is None:
            # A file outside the table directory was not copied: the relocated table would
            # silently point back at the local disk.
            raise ValueError(f"path {value!r} is not under the table directory {self.prefixes[-1][0]}")
        return out


def _key(path: str) -> str:
    """One spelling per local file (``file:///x``, ``file:/x`` and ``/x`` are the same file)."""
    for form in ("file://", "file:"):
        if path.startswith(form):
            return path[len(form):]
    return path


def _rewrite_json(value: Any, mapper: PathMapper, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _rewrite_json(v, mapper, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite_json(v, mapper, key) for v in value]
    if isinstance(value, str):
        if key in _JSON_PATH_KEYS:
            return mapper(value)
        return mapper.maybe(value) or value
    return value


def _rewrite_metadata_json(data: bytes, mapper: PathMapper) -> bytes:
    compressed = data[:2] == b"\x1f\x8b"  # vN.gz.metadata.json and vN.metadata.json.gz
    doc = json.loads(gzip.decompress(data) if compressed else data)
    out = json.dumps(_rewrite_json(doc, mapper), separators=(",", ":")).encode()
    return gzip.compress(out, mtime=0) if compressed else out


def _avro_header(data: bytes) -> tuple[dict[str, bytes], bytes, int]:
    """``(metadata, sync marker, offset of the first block)`` of an Avro container file."""
    stream = io.BytesIO(data)
    header = fastavro.schemaless_reader(stream, HEADER_SCHEMA)
    if header["magic"] != b"Obj\x01":
        raise ValueError("not an Avro container file")
    return dict(header["meta"]), bytes(header["sync"]), stream.tell()


def _strip_logical_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_strip_logical_types(s) for s in schema]
    return schema


def read_raw_avro(data: bytes) -> tuple[dict[str, Any], dict[str, bytes], bytes, list[dict[str, Any]]]:
    """Records of an Avro file with logical types NOT applied, so values round-trip bit for bit.

    fastavro applies logical types from the writer schema (a decimal becomes a Decimal, a
    timestamp a datetime) and re-encodes them on write, which need not reproduce Java's bytes.
    Reading through a copy of the file whose header schema has no logical types yields the
    stored ints and bytes, which fastavro's writer passes through unchanged.
    """
    meta, sync, body_start = _avro_header(data)
    schema = json.loads(meta["avro.schema"])
    raw_meta = {**meta, "avro.schema": json.dumps(_strip_logical_types(schema)).encode()}
    header = io.BytesIO()
    fastavro.schemaless_writer(header, HEADER_SCHEMA, {"magic": b"Obj\x01", "meta": raw_meta, "sync": sync})
    records = list(fastavro.reader(io.BytesIO(header.getvalue() + data[body_start:])))
    return schema, meta, sync, records


def write_avro(schema: dict[str, Any], meta: dict[str, bytes], sync: bytes,
                records: list[dict[str, Any]]) -> bytes:
    """Write ``records`` with the original writer schema, codec, key-value metadata and sync marker."""
    codec = meta.get("avro.codec", b"null").decode()
    extra = {k: v.decode() for k, v in meta.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, schema, records, codec=codec, metadata=extra, sync_marker=sync)
    return out.getvalue()


def _field_name(record_schema: dict[str, Any], field_id: int, default: str) -> str:
    """The Avro name of the field with Iceberg ``field-id`` (old writers spell names differently)."""
    for f in record_schema.get("fields", []):
        if f.get("field-id") == field_id:
            return str(f["name"])
    return default


def _record_type(field_type: Any) -> dict[str, Any]:
    if isinstance(field_type, list):  # an optional record: ["null", {...}]
        field_type = next(t for t in field_type if isinstance(t, dict))
    return field_type


def _avro_kind(data: bytes) -> str:
    """``manifest-list``, ``manifest`` or ``other`` by the writer schema's field ids."""
    try:
        meta, _, _ = _avro_header(data)
        schema = json.loads(meta["avro.schema"])
    except Exception:
        return "other"
    ids = {f.get("field-id") for f in schema.get("fields", [])} if isinstance(schema, dict) else set()
    names = {f.get("name") for f in schema.get("fields", [])} if isinstance(schema, dict) else set()
    if _MANIFEST_PATH_ID in ids or "manifest_path" in names:
        return "manifest-list"
    if _DATA_FILE_ID in ids or "data_file" in names:
        return "manifest"
    return "other"


class _Manifest:
    """A manifest read raw, with the Avro names of the ``data_file`` fields that relocation touches."""

    def __init__(self, data: bytes) -> None:
        self.schema, self.meta, self.sync, self.records = read_raw_avro(data)
        self.df = _field_name(self.schema, _DATA_FILE_ID, "data_file")
        df_schema = _record_type(next(f["type"] for f in self.schema["fields"] if f["name"] == self.df))
        self.names = {name: _field_name(df_schema, field_id, name) for field_id, name in _DATA_FILE_FIELDS.items()}

    def files(self) -> Iterator[dict[str, Any]]:
        return (rec[self.df] for rec in self.records)

    def get(self, df: dict[str, Any], name: str) -> Any:
        return df.get(self.names[name])

    def set(self, df: dict[str, Any], name: str, value: Any) -> None:
        df[self.names[name]] = value


def _position_delete_files(manifest: _Manifest, mapper: PathMapper) -> set[str]:
    """Relocated paths of the Parquet position delete files the manifest lists (they name data files)."""
    return {_key(mapper(manifest.get(df, "file_path"))) for df in manifest.files()
            if manifest.get(df, "content") == _POSITION_DELETES
            and str(manifest.get(df, "file_format")).upper() == "PARQUET"}


def _rewrite_manifest(manifest: _Manifest, mapper: PathMapper, rewritten: dict[str, _Rewritten],
                      delete_bounds: bool) -> bytes:
    for df in manifest.files():
        manifest.set(df, "file_path", mapper(manifest.get(df, "file_path")))
        new = rewritten.get(_key(manifest.get(df, "file_path")))
        if new is not None:  # a Puffin footer or a position delete file was rewritten: new size, offsets
            manifest.set(df, "file_size_in_bytes", new.size)
            if new.split_offsets is not None and manifest.get(df, "split_offsets") is not None:
                manifest.set(df, "split_offsets", new.split_offsets)
            if new.column_sizes and manifest.get(df, "column_sizes") is not None:
                manifest.set(df, "column_sizes", [{**kv, "value": new.column_sizes.get(kv["key"], kv["value"])}
                                                  for kv in manifest.get(df, "column_sizes")])
        for bounds in ("lower_bounds", "upper_bounds") if delete_bounds else ():
            # Position deletes keep full (never truncated) bounds of file_path: readers match data files by them.
            for kv in manifest.get(df, bounds) or ():
                if kv["key"] == _DELETE_FILE_PATH_ID:
                    kv["value"] = (mapper.maybe(kv["value"].decode()) or kv["value"].decode()).encode()
        if manifest.get(df, "referenced_data_file") is not None:
            manifest.set(df, "referenced_data_file", mapper(manifest.get(df, "referenced_data_file")))
    return write_avro(manifest.schema, manifest.meta, manifest.sync, manifest.records)


@dataclass(frozen=True)
class _Rewritten:
    size: int
    split_offsets: list[int] | None = None
    column_sizes: dict[int, int] | None = None


def _rewrite_position_deletes(data: bytes, mapper: PathMapper) -> tuple[bytes, _Rewritten]:
    """A v2 position delete file names its data files in the ``file_path`` column: rewrite them.

    Row groups, rows (still sorted: one prefix is swapped for another), field ids, key-value
    metadata and codec are kept; the new row-group offsets and column sizes go into the manifest.
    """
    source = pq.ParquetFile(io.BytesIO(data))
    codec = source.metadata.row_group(0).column(0).compression if source.metadata.num_row_groups else "ZSTD"
    out = io.BytesIO()
    with pq.ParquetWriter(out, source.schema_arrow, compression=codec, store_schema=False) as writer:
        for i in range(source.metadata.num_row_groups):
            group = source.read_row_group(i)
            column = group.schema.get_field_index("file_path")
            paths = pa.array([mapper(p) for p in group.column(column).to_pylist()], group.schema.field(column).type)
            writer.write_table(group.set_column(column, group.schema.field(column), paths))
    new = out.getvalue()
    meta = pq.ParquetFile(io.BytesIO(new)).metadata
    offsets, sizes = [], {}
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        first = group.column(0)
        offsets.append(min(o for o in (first.dictionary_page_offset, first.data_page_offset) if o is not None))
        for c in range(group.num_columns):
            field = source.schema_arrow.field(group.column(c).path_in_schema)
            field_id = int((field.metadata or {}).get(b"PARQUET:field_id", -1))
            sizes[field_id] = sizes.get(field_id, 0) + group.column(c).total_compressed_size
    return new, _Rewritten(len(new), offsets, sizes)


def _rewrite_puffin(data: bytes, mapper: PathMapper) -> bytes:
    """A DV's footer names its data file (``referenced-data-file``): relocate that name too.

    Blob offsets do not move (only the footer changes); the footer is written uncompressed.
    """
    footer = read_puffin_footer(data)
    start = len(data) - footer.footer_size
    doc = json.loads(data[start + 4:start + footer.footer_size - 12])
    changed = False
    for blob in doc.get("blobs", ()):
        props = blob.get("properties") or {}
        if "referenced-data-file" in props:
            props["referenced-data-file"] = mapper(props["referenced-data-file"])
            changed = True
    if not changed:
        return data
    payload = json.dumps(doc, separators=(",", ":")).encode()
    return data[:start] + PUFFIN_MAGIC + payload + struct.pack("<iI", len(payload), 0) + PUFFIN_MAGIC


def _rewrite_manifest_list(data: bytes, mapper: PathMapper, lengths: dict[str, int]) -> bytes:
    schema, meta, sync, records = read_raw_avro(data)
    path_field = _field_name(schema, _MANIFEST_PATH_ID, "manifest_path")
    length_field = _field_name(schema, _MANIFEST_LENGTH_ID, "manifest_length")
    for rec in records:
        rec[path_field] = mapper(rec[path_field])
        # A rewritten manifest has a new size; readers may trust manifest_length.
        if _key(rec[path_field]) in lengths:
            rec[length_field] = lengths[_key(rec[path_field])]
    return write_avro(schema, meta, sync, records)


def _is_checksum(path: Path) -> bool:
    # Hadoop's local file system writes ".<name>.crc" beside every file; object stores have none.
    return path.name.startswith(".") and path.name.endswith(".crc")


def relocate_table(src_table_dir: Path, dst_location: str, fs_put: FsPut, *,
                   position_deletes: bool = False, keep_scheme: bool = False) -> str:
    """Copy a local table directory to ``dst_location``, rewriting every absolute path in it.

    ``dst_location`` is the new table directory (``s3://bucket/wh/db/t``); ``fs_put(url, data)``
    stores one object (it is called from several threads).  Metadata JSON (plain or gzip) gets
    every path under the table directory rewritten; manifests and manifest lists are re-encoded
    with their own writer schema, codec and key-value metadata, with new ``file_path``,
    ``referenced_data_file``, ``manifest_path`` and ``manifest_length``; Puffin deletion-vector
    files get their footers' ``referenced-data-file`` rewritten (new sizes go into the manifests).
    With ``position_deletes`` the ``file_path`` column of Parquet position delete files is
    rewritten too (new sizes, split offsets, column sizes and ``file_path`` bounds go into the
    manifests): an engine that applies v2 deletes (Spark) needs it; icectl never reads those
    rows, so the S3 and corruption copies keep the delete files byte for byte (and their tests
    compare sizes and metrics with the source's).  Everything else (data, statistics,
    ``version-hint.text``) is copied byte for byte; Hadoop ``.crc`` side files are skipped.
    ``keep_scheme``: see :class:`PathMapper`.  Works for format v1-v3.  Returns the new table location.
    """
    src = Path(src_table_dir)
    dst = dst_location.rstrip("/")
    mapper = PathMapper(src, dst, keep_scheme=keep_scheme)
    files = sorted(p for p in src.rglob("*") if p.is_file() and not _is_checksum(p))

    manifests: list[tuple[str, bytes]] = []
    manifest_lists: list[tuple[str, bytes]] = []
    metadata: list[tuple[str, bytes]] = []
    plain: list[tuple[str, bytes]] = []
    for p in files:
        url = f"{dst}/{p.relative_to(src).as_posix()}"
        data = p.read_bytes()
        if p.name.endswith(_METADATA_JSON_SUFFIXES):
            metadata.append((url, data))
        elif p.name == "version-hint.text":
            pass  # written last, below
        elif p.suffix == ".avro" and (kind := _avro_kind(data)) != "other":
            (manifests if kind == "manifest" else manifest_lists).append((url, data))
        else:
            plain.append((url, data))

    out: list[tuple[str, bytes]] = []
    parsed = [(url, _Manifest(data)) for url, data in manifests]
    deletes = set().union(*(_position_delete_files(m, mapper) for _, m in parsed)) if position_deletes else set()
    rewritten: dict[str, _Rewritten] = {}
    for url, data in plain:
        if url.endswith(".puffin"):
            data = _rewrite_puffin(data, mapper)
            rewritten[_key(url)] = _Rewritten(len(data))
        elif _key(url) in deletes:
            data, rewritten[_key(url)] = _rewrite_position_deletes(data, mapper)
        out.append((url, data))
    lengths: dict[str, int] = {}
    for url, manifest in parsed:
        new = _rewrite_manifest(manifest, mapper, rewritten, position_deletes)
        lengths[_key(url)] = len(new)
        out.append((url, new))
    out.extend((url, _rewrite_manifest_list(data, mapper, lengths)) for url, data in manifest_lists)
    out.extend((url, _rewrite_metadata_json(data, mapper)) for url, data in metadata)
    # Uploads are round trips, not work: run them side by side (v2_part: 200 objects, ~3 s -> <1 s).
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in pool.map(lambda item: fs_put(*item), out):
            pass  # iterate to re-raise the first failed upload
    hint = src / "metadata" / "version-hint.text"
    if hint.is_file():
        # Last: a table becomes visible under its hint only once all of its files are there.
        fs_put(f"{dst}/metadata/version-hint.text", hint.read_bytes())
    return dst


# --------------------------------------------------------------------------- a local copy for Spark

CRC_BYTES_PER_CHECKSUM = 512  # Hadoop's io.bytes.per.checksum default


def hadoop_crc(data: bytes, bytes_per_checksum: int = CRC_BYTES_PER_CHECKSUM) -> bytes:
    """The ``.<name>.crc`` sidecar Hadoop's ChecksumFileSystem writes for ``data``.

    Layout (``ChecksumFileSystem``): magic ``crc\\0``, big-endian int bytes-per-checksum, then one
    big-endian CRC-32 per chunk.  Hadoop checks a file against its sidecar on every read, so a
    rewritten file needs a fresh one.
    """
    chunks = (data[i:i + bytes_per_checksum] for i in range(0, len(data), bytes_per_checksum))
    return b"crc\0" + struct.pack(">i", bytes_per_checksum) + b"".join(
        struct.pack(">I", zlib.crc32(chunk)) for chunk in chunks)


def checksum_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.crc")


def copy_table_dir(src: Path, dst: Path) -> Path:
    """Copy the local table directory ``src`` to ``dst`` with every absolute path rewritten.

    Paths keep their spelling (``file:/...`` stays ``file:/...``), so the copy looks as if the
    same writer had written it at ``dst``.  Every file that had a Hadoop ``.crc`` sidecar gets one
    computed from its new bytes (Spark reads through Hadoop's checksummed local file system and
    rejects a stale one; expire deletes the sidecars, and tests check that).  ``version-hint.text``
    is written last, so the table appears only when complete.  Returns ``dst``.
    """
    src, dst = Path(src), Path(dst)
    if dst.exists():
        raise FileExistsError(dst)
    with_crc = {p.parent / p.name[1:-len(".crc")] for p in src.rglob(".*.crc")}

    def put(url: str, data: bytes) -> None:
        path = Path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if src / path.relative_to(dst) in with_crc:
            checksum_path(path).write_bytes(hadoop_crc(data))

    relocate_table(src, str(dst.absolute()), put, position_deletes=True, keep_scheme=True)
    return dst
