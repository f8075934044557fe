"""Avro object container files decoded into Arrow by a native decoder: Apache DataFusion's Avro
reader (Rust, arrow-rs), about 10x fastavro's speed on a manifest and with no Python object per
record.

It is a fast path, never the judge: :mod:`icectl.codec.manifest_arrow` checks the writer schema
first, compares what comes back with the container's own block counts, and on any doubt or error
decodes with fastavro, whose errors are the ones icectl reports. ``ICECTL_AVRO_DECODER=fastavro``
turns the native path off (for comparison and troubleshooting); so does a missing ``datafusion``.

DataFusion reads files, not bytes: the bytes go to a private temporary file that lives for one
read, its blocks already inflated by zlib (the inflater fastavro uses), so a damaged deflate
stream is never read two ways. It cannot decode a record with no fields (an unpartitioned table's
``partition``); an empty record encodes to zero bytes, so such fields are dropped from the
header's schema and the data blocks decode unchanged.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import tempfile
import threading
import uuid
from typing import TYPE_CHECKING, Any, cast

from icectl.codec.avro import container_header, container_header_bytes, named_types
from icectl.errors import IcectlError

if TYPE_CHECKING:
    import pyarrow as pa

DECODER_ENV = "ICECTL_AVRO_DECODER"  # "native" (default) or "fastavro"


class NotNative(Exception):  # a condition to fall back on, not an IcectlError
    """The native decoder cannot (or must not) decode this file: use fastavro."""


@functools.cache
def _datafusion_available() -> bool:
    # Found, not imported: importing datafusion (and the pandas it pulls in) costs ~0.2 s, which a
    # run served from the manifest cache never needs. A broken install fails at the first read,
    # which then falls back to fastavro.
    return importlib.util.find_spec("datafusion") is not None


def native_enabled() -> bool:
    """Whether manifests are decoded natively (the default when ``datafusion`` is installed)."""
    return (os.environ.get(DECODER_ENV, "native").strip().lower() != "fastavro" and _datafusion_available()
            and not _stuck.is_set())


_lock = threading.Lock()
_idle: list[Any] = []  # DataFusion sessions not in use: one per concurrent read (a session serialises)


def _borrow_session() -> Any:
    with _lock:
        if _idle:
            return _idle.pop()
    import datafusion

    return datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(1))  # one file


def _return_session(session: Any) -> None:
    with _lock:
        _idle.append(session)


def read_avro_table(data: bytes, schema: dict[str, Any]) -> pa.Table:
    """Every record of an Avro container as one Arrow table (columns named as the Avro fields;
    empty-record fields left out). ``schema`` is the container's writer schema, as parsed by the
    caller. Raises :class:`NotNative` when the file's framing or row count is not what its blocks
    say, and whatever the decoder raises on data it cannot read."""
    return read_avro_tables([data], schema)[0]


def read_avro_tables(datas: list[bytes], schema: dict[str, Any]) -> list[pa.Table]:
    """:func:`read_avro_table` of each container, decoded together (:func:`read_avro_joined`)."""
    table, rows = read_avro_joined(datas, schema)
    out, at = [], 0
    for n in rows:
        out.append(table.slice(at, n))
        at += n
    return out


def read_avro_joined(datas: list[bytes], schema: dict[str, Any]) -> tuple[pa.Table, list[int]]:
    """The records of every container in one table, and how many each holds, in ONE native read: containers with the
    same writer schema and codec (``schema``, the caller's grouping) are joined block by block into
    one container (each block re-framed with the first one's sync marker), so many small files
    (a table's 100-entry manifests) pay the decoder's fixed cost once. Each file's blocks are
    checked as in a read of its own; one failure fails all (the caller reads them one by one)."""
    stripped = drop_empty_records(schema)
    header_end, sync, meta = _header(datas[0])
    codec = meta.get("avro.codec", b"null").decode(errors="replace")
    if codec not in ("null", "deflate"):
        raise NotNative(f"codec {codec!r}")  # fastavro decides (and names what it cannot read)
    blocks: list[tuple[int, int]] = []
    rows: list[int] = []
    body: list[bytes] = []
    for data in datas:
        end, own_sync, own_meta = _header(data) if data is not datas[0] else (header_end, sync, meta)
        if (own_meta.get("avro.codec", b"null"), own_meta.get("avro.schema")) != \
                (meta.get("avro.codec", b"null"), meta.get("avro.schema")):
            raise NotNative("containers with different writer schemas or codecs")
        found = _blocks(data, end, own_sync, codec)
        for count, decoded in found:
            body += [_zigzag(count), _zigzag(len(decoded)), decoded, sync]
            blocks.append((count, len(decoded)))
        rows.append(sum(count for count, _ in found))
    # Blocks go to the decoder inflated, in a "null" codec container: it decodes exactly the bytes
    # zlib gave (fastavro's inflater), never its own inflater's reading of a damaged stream.
    header = container_header_bytes(meta | {"avro.schema": json.dumps(stripped).encode(), "avro.codec": b"null"},
                                    sync)
    # A new name in the temporary folder, created exclusively (never through someone's symlink),
    # removed after the read.
    path = os.path.join(tempfile.gettempdir(), f"icectl-avro-{uuid.uuid4().hex}.avro")
    with open(path, "xb") as f:
        f.write(header)
        for part in body:
            f.write(part)
    try:
        table = _guarded_read(path, sum(size for _, size in blocks))
    finally:
        os.unlink(path)
    if table.num_rows != sum(rows):
        raise NotNative(f"native decoder gave {table.num_rows} records, the blocks hold {sum(rows)}")
    _check_lengths(stripped, table, blocks)
    return table, rows


def _zigzag(value: int) -> bytes:
    """An Avro long: zig-zag, then a varint."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# The native decoder can spin forever on some valid but unusual files (seen: a bit flip that
# fastavro decodes without complaint). Each read runs in a daemon thread with a deadline far above
# any real read (the decoder manages ~30 MB/s on a loaded core); past it the file goes to fastavro
# and this process stops using the native decoder (the stuck thread ends with the process).
_DEADLINE_SECONDS = 10.0
_SECONDS_PER_BYTE = 1 / 2_000_000
_stuck = threading.Event()


def _guarded_read(path: str, decoded_bytes: int) -> pa.Table:
    if _stuck.is_set():
        raise NotNative("the native decoder is off in this process: an earlier read did not finish")
    result: list[Any] = []
    native_id: list[int] = []

    def read() -> None:
        native_id.append(threading.get_native_id())
        try:
            session = _borrow_session()
        except ImportError as e:  # found but not importable: fastavro decides
            result.append(NotNative(f"datafusion cannot be imported: {e}"))
            return
        try:
            result.append(session.read_avro(path).to_arrow_table())
        except BaseException as e:  # handed to the caller
            result.append(e)
        _return_session(session)  # not after a hang: that session never comes back

    worker = threading.Thread(target=read, name="icectl-avro-native", daemon=True)
    worker.start()
    worker.join(_DEADLINE_SECONDS + decoded_bytes * _SECONDS_PER_BYTE)
    if not result:
        _stuck.set()
        try:  # the spinning thread gets only what the machine leaves idle (Linux: per thread)
            os.setpriority(os.PRIO_PROCESS, native_id[0], 19)
        except (OSError, AttributeError, IndexError):
            pass
        raise NotNative("the native decoder did not finish in time")
    if isinstance(result[0], BaseException):
        raise result[0]
    return cast("pa.Table", result[0])


def drop_empty_records(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without fields whose type is a record with no fields (at any depth); the same
    object when there are none. A union holding an empty record is left for fastavro."""
    fields = schema.get("fields", [])
    kept: list[dict[str, Any]] = []
    changed = False
    for f in fields:
        t = f.get("type")
        if isinstance(t, dict) and t.get("type") == "record":
            if not t.get("fields"):
                changed = True
                continue
            inner = drop_empty_records(t)
            if inner is not t:
                f, changed = {**f, "type": inner}, True
        elif isinstance(t, list) and any(isinstance(b, dict) and b.get("type") == "record" and not b.get("fields")
                                         for b in t):
            raise NotNative("a union holds an empty record")
        kept.append(f)
    return {**schema, "fields": kept} if changed else schema


def _header(data: bytes) -> tuple[int, bytes, dict[str, bytes]]:
    try:
        return container_header(data)
    except IcectlError as e:
        raise NotNative(f"unreadable header: {e}") from None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """An Avro long (zig-zag varint) at ``pos``: (value, next position)."""
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise NotNative("truncated or damaged block header")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _blocks(data: bytes, pos: int, sync: bytes, codec: str) -> list[tuple[int, bytes]]:
    """Each block's record count and its data, inflated. Every block must end with the header's
    sync marker, and the last one at the end of the file (so a cut or shifted file never decodes)."""
    import zlib

    blocks = []
    while pos < len(data):
        count, pos = _varint(data, pos)
        size, pos = _varint(data, pos)
        if count < 0 or size < 0 or pos + size + 16 > len(data) or data[pos + size:pos + size + 16] != sync:
            raise NotNative("truncated or damaged block")
        if codec == "deflate":
            inflate = zlib.decompressobj(-15)
            try:
                decoded = inflate.decompress(data[pos:pos + size]) + inflate.flush()
            except zlib.error as e:
                raise NotNative(f"damaged deflate block: {e}") from None
            # A stream cut short is left to fastavro (which reads what there is). Bytes after the
            # stream's end are normal: fastavro's own writer leaves 3 bytes of a zlib checksum there.
            if not inflate.eof:
                raise NotNative("damaged deflate block: the stream does not end")
        else:
            decoded = data[pos:pos + size]
        blocks.append((count, decoded))
        pos += size + 16
    return blocks


# --------------------------------------------------------------------------- the length check
# arrow-rs's Avro decoder is lenient where fastavro is strict: it reads any non-zero union branch
# as the value branch and leaves a block's unread bytes unnoticed, so a damaged block can decode
# to a plausible table. The check: the records as decoded, encoded again as Avro's binary encoding
# does (minimal varints, one-block arrays, as Java and fastavro write them), must fill each block
# exactly. Computed column-wise with Arrow kernels, no Python object per record; a file written
# another way (non-minimal varints, multi-block arrays) is not wrong, just left to fastavro.


def _check_lengths(schema: dict[str, Any], table: pa.Table, blocks: list[tuple[int, int]]) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    named = named_types(schema, {})
    n = table.num_rows
    total = pa.repeat(pa.scalar(0, pa.int64()), n)
    for f in schema["fields"]:
        column = table.column(f["name"]).combine_chunks()
        total = pc.add(total, _encoded(f["type"], column, named))
    # Where each block's records end, as decoded and as the blocks say: the two must agree.
    ends = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(total)])
    last_rows, sizes, row, at = [], [], 0, 0
    for count, size in blocks:
        row, at = row + count, at + size
        last_rows.append(row)
        sizes.append(at)
    if not pc.all(pc.equal(pc.take(ends, pa.array(last_rows, pa.int64())), pa.array(sizes, pa.int64()))).as_py() \
            and blocks:
        raise NotNative("the decoded records do not fill their blocks")


def _varint_len(values: pa.Array) -> pa.Array:
    """Bytes of each unsigned 64-bit value as a varint (1 to 10): one comparison per 7 bits up to
    the largest value (most are small)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = pa.repeat(pa.scalar(1, pa.int64()), len(values))
    top = pc.max(values).as_py() if len(values) else None
    for bits in range(7, 64, 7):
        if top is None or top < 1 << bits:
            break
        out = pc.add(out, pc.greater_equal(values, pa.scalar(1 << bits, pa.uint64())).cast(pa.int64()))
    return out


def _long_len(values: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    v = values.cast(pa.int64())
    zigzag = pc.bit_wise_xor(pc.shift_left(v, pa.scalar(1, pa.int64())), pc.shift_right(v, pa.scalar(63, pa.int64())))
    return _varint_len(pc.fill_null(zigzag, pa.scalar(0, pa.int64())).view(pa.uint64()))


def _encoded(avro_type: Any, column: pa.Array, named: dict[str, Any]) -> pa.Array:
    """Each value's length in Avro's binary encoding (nulls: 0, their union index counted above)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(avro_type, str) and avro_type in named:
        avro_type = named[avro_type]
    if isinstance(avro_type, list):  # a union: one byte of branch index (0 or 1) + the value
        branches = [b for b in avro_type if b != "null"]
        if len(avro_type) != 2 or len(branches) != 1:
            raise NotNative("a union that is not [null, T]")
        inner = _encoded(branches[0], column, named)
        if column.null_count:
            inner = pc.if_else(column.is_null(), pa.scalar(0, pa.int64()), inner)
        return pc.add(inner, pa.scalar(1, pa.int64()))
    t: Any = avro_type.get("type") if isinstance(avro_type, dict) else avro_type
    if isinstance(t, (dict, list)):
        return _encoded(t, column, named)
    logical = avro_type.get("logicalType") if isinstance(avro_type, dict) else None
    width = {"float": 4, "double": 8, "boolean": 1}.get(t)
    if width is not None:
        return pa.repeat(pa.scalar(width, pa.int64()), len(column))
    if t == "fixed":
        return pa.repeat(pa.scalar(int(avro_type["size"]), pa.int64()), len(column))
    if t in ("int", "long"):
        if pa.types.is_temporal(column.type):
            column = column.view(pa.int32() if column.type.bit_width == 32 else pa.int64())
        return _long_len(column)
    if t in ("string", "bytes") and logical is None:
        sizes = pc.binary_length(column).cast(pa.int64())
        return pc.add(sizes, _long_len(pc.fill_null(sizes, pa.scalar(0, pa.int64()))))  # a long: zig-zag
    if t == "record":
        total = pa.repeat(pa.scalar(0, pa.int64()), len(column))
        children = {column.type.field(i).name: column.field(i) for i in range(column.type.num_fields)}
        for f in avro_type.get("fields", ()):
            if f["name"] in children:  # empty records were dropped: zero bytes
                total = pc.add(total, _encoded(f["type"], children[f["name"]], named))
        return total
    if t == "array":
        return _array_len(avro_type["items"], column, named)
    raise NotNative(f"Avro type {t!r} is not length-checked")


def _array_len(items: Any, column: pa.Array, named: dict[str, Any]) -> pa.Array:
    """Arrays as one block: the count, the items, a 0 (an empty array: the 0 alone)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = column.offsets.cast(pa.int64())
    values = column.values
    item_len = _encoded(items, values, named) if len(values) else pa.array([], pa.int64())
    ends = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(item_len)]) if len(values) \
        else pa.array([0], pa.int64())
    starts_at, ends_at = offsets.slice(0, len(column)), offsets.slice(1)
    item_bytes = pc.subtract(pc.take(ends, ends_at), pc.take(ends, starts_at))
    counts = pc.subtract(ends_at, starts_at)
    block = pc.add(pc.add(_long_len(counts), item_bytes), pa.scalar(1, pa.int64()))
    lengths = pc.if_else(pc.equal(counts, pa.scalar(0, pa.int64())), pa.scalar(1, pa.int64()), block)
    return pc.if_else(column.is_null(), pa.scalar(0, pa.int64()), lengths) if column.null_count else lengths
