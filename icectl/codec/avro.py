"""Avro object container files (Avro spec "Object Container Files") as icectl's codecs use them:
the one place that knows fastavro's ways.

Reading: open a container (magic checked, errors turned into :class:`~icectl.errors.CorruptInputError`),
its writer schema, named types, and fields matched by Iceberg field id (``field-id``) first and by
name second; Avro values back to icectl's values (:mod:`icectl.spec.values`), since fastavro applies
the writer schema's logical types. Writing: Iceberg types to Avro schema JSON as Java's
``TypeToSchema`` does, Avro field names as ``AvroSchemaUtil.sanitize`` makes them, and containers
with Java's block size and compact schema JSON. Manifests, manifest lists and v4 manifests
(:mod:`icectl.codec.manifest_reader`, :mod:`icectl.codec.manifest_writer`,
:mod:`icectl.codec.v4_proposal`) are built on these. Bytes in, bytes out.
"""

from __future__ import annotations

import functools
import io
import json
import os
import struct
import unicodedata
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, BinaryIO, cast

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.schema import DecimalType, FixedType, IcebergType, ListType, MapType, PrimitiveType, StructType
from icectl.spec.values import decimal_from_unscaled, decimal_unscaled, from_bytes, to_bytes

AvroSource = BinaryIO | bytes | bytearray | memoryview

AVRO_MAGIC = b"Obj\x01"
# The object container header (Avro spec "Object Container Files").
_HEADER = {"type": "record", "name": "org.apache.avro.file.Header", "fields": [
    {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
    {"name": "meta", "type": {"type": "map", "values": "bytes"}},
    {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}}]}
_SYNC_INTERVAL = 64_000  # Avro Java DataFileWriter's default block size (uncompressed bytes)
# Avro codec names and Iceberg's write.avro.compression-codec aliases. zstd/snappy are left out:
# fastavro cannot read them back without extra packages, so icectl could not check what it wrote.
_CODECS = {"null": "null", "uncompressed": "null", "deflate": "deflate", "gzip": "deflate"}
# Older writers' names for the same ids (used only when the schema has no field ids).
_ALIASES = {
    "added_files_count": "added_data_files_count",
    "existing_files_count": "existing_data_files_count",
    "deleted_files_count": "deleted_data_files_count",
}


# fastavro is imported where it is used, not with this module: commands that read no Avro
# (`icectl inspect table`, `--help`) import this module through icectl.table.scan and must start fast.

@functools.cache
def _parsed_schemas() -> tuple[Any, Any]:
    """The container header's schema and Avro ``long``, parsed once."""
    import fastavro

    return fastavro.parse_schema(_HEADER), fastavro.parse_schema("long")


def _fastavro_schema_errors() -> tuple[type[Exception], ...]:
    from fastavro.read import SchemaResolutionError
    from fastavro.schema import SchemaParseException, UnknownType

    return SchemaParseException, UnknownType, SchemaResolutionError


# --------------------------------------------------------------------------- reading

def as_stream(source: AvroSource) -> BinaryIO:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source))
    return source


@contextmanager
def avro_errors() -> Iterator[None]:
    """Turn fastavro's and the codecs' exceptions into CorruptInputError / UnsupportedError."""
    try:
        yield
    except (CorruptInputError, UnsupportedError):
        raise
    except EOFError:
        raise CorruptInputError("truncated Avro file") from None
    except UnicodeDecodeError as e:  # before ValueError: it is one, and its text says "codec"
        raise CorruptInputError(f"corrupt Avro data: a string is not valid UTF-8 ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise CorruptInputError(f"corrupt Avro header: the schema is not valid JSON ({e.msg})") from None
    except _fastavro_schema_errors() as e:  # evaluated only when an exception gets this far
        raise CorruptInputError(f"corrupt Avro header: invalid schema ({type(e).__name__}: {e})") from None
    except ValueError as e:
        text = str(e)
        if "codec" in text:
            raise UnsupportedError(f"Avro compression codec not supported: {text}") from None
        if "cannot read header" in text:
            raise CorruptInputError("not an Avro file (bad magic or truncated header)") from None
        if "sync marker" in text:
            raise CorruptInputError("corrupt Avro file: sync marker not found "
                                    "(truncated or damaged block)") from None
        raise CorruptInputError(f"corrupt Avro data: {text}") from None
    except (zlib.error, struct.error, IndexError, KeyError, TypeError, OverflowError, MemoryError) as e:
        raise CorruptInputError(f"corrupt Avro data: {type(e).__name__}: {e}") from None


def check_magic(stream: BinaryIO) -> BinaryIO:
    """Refuse a file that does not start with Avro's magic, as Java's DataFileReader does ("Not an
    Avro data file"): fastavro reads the 4 bytes as a fixed field and never compares them, so a
    file with destroyed magic would otherwise decode. Returns a stream positioned at the start."""
    if stream.seekable():
        start = stream.tell()
        magic = stream.read(len(AVRO_MAGIC))
        stream.seek(start)
    else:  # cannot rewind: read it whole (manifests are read whole anyway)
        magic = stream.read(len(AVRO_MAGIC))
        stream = io.BytesIO(magic + stream.read())
    if magic != AVRO_MAGIC:
        if 0 < len(magic) < len(AVRO_MAGIC) and AVRO_MAGIC.startswith(magic):
            raise CorruptInputError("truncated Avro file (incomplete header)")
        raise CorruptInputError(f"not an Avro file (bad magic {magic!r}, expected {AVRO_MAGIC!r})")
    return stream


def open_reader(stream: BinaryIO, reader_schema: dict[str, Any] | None = None) -> Any:
    import fastavro

    stream = check_magic(stream)
    start = stream.tell() if stream.seekable() else None
    try:
        with avro_errors():
            return fastavro.reader(stream, reader_schema=reader_schema)
    except CorruptInputError as e:
        # Tell a cut-off header from a file that is not Avro at all, when the stream allows it.
        if start is not None and "not an Avro file" in e.message:
            stream.seek(start)
            if stream.read(4) == AVRO_MAGIC:
                raise CorruptInputError("truncated Avro file (incomplete header)") from None
        raise


def writer_schema(reader: Any) -> dict[str, Any]:
    # The raw JSON keeps the field-id attributes exactly as written.
    try:
        schema = json.loads(reader.metadata["avro.schema"])
    except (KeyError, ValueError):
        raise CorruptInputError("Avro file has no readable schema") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise CorruptInputError("Avro file schema is not a record")
    return schema


def read_records(reader: Any) -> Iterator[dict[str, Any]]:
    # Decoding happens in next(): translate its errors. A consumer's own exceptions never enter
    # this frame (only GeneratorExit, which avro_errors does not catch), so one `with` serves all.
    with avro_errors():
        yield from reader


_PROBE_BYTES = 64 * 1024  # a manifest's header (its schema JSON) fits in this, as a rule


def probe_avro_file(read_range: Callable[[int, int], bytes], size: int) -> dict[str, str]:
    """Check that a file opens as an Avro container without decoding its records; returns its
    key-value metadata. Reads the header (magic, metadata, schema JSON) and the last 16 bytes,
    which in a complete Avro file are the header's sync marker (every block ends with it), so a
    cut-off file is told from a whole one for the cost of two small reads."""
    from fastavro import schemaless_reader

    head = read_range(0, min(size, _PROBE_BYTES))
    while True:
        stream = check_magic(io.BytesIO(head))
        try:
            with avro_errors():
                # the header's schema is a record: fastavro gives a dict
                header = cast("dict[str, Any]", schemaless_reader(stream, _parsed_schemas()[0], None))
            break
        except CorruptInputError as e:
            if "truncated" not in e.message or len(head) >= size:
                raise
            head = read_range(0, size)  # a header larger than the probe: read it whole
    meta = {k: v.decode(errors="replace") for k, v in header["meta"].items()}
    try:
        json.loads(meta["avro.schema"])
    except (KeyError, ValueError):
        raise CorruptInputError("Avro file has no readable schema") from None
    end = stream.tell()
    if size > end and read_range(size - 16, 16) != header["sync"]:
        raise CorruptInputError("truncated or damaged Avro file: it does not end with its sync marker")
    return meta


def container_header(data: bytes) -> tuple[int, bytes, dict[str, bytes]]:
    """An Avro container's header: where its first block starts, its sync marker, its metadata."""
    from fastavro import schemaless_reader

    stream = check_magic(io.BytesIO(data))
    with avro_errors():
        header = cast("dict[str, Any]", schemaless_reader(stream, _parsed_schemas()[0], None))
    return stream.tell(), header["sync"], header["meta"]


def container_header_bytes(meta: dict[str, bytes], sync: bytes) -> bytes:
    """The bytes of a container header with this metadata and sync marker."""
    from fastavro import schemaless_writer

    out = io.BytesIO()
    schemaless_writer(out, _parsed_schemas()[0], {"magic": AVRO_MAGIC, "meta": meta, "sync": sync})
    return out.getvalue()


def named_types(schema: Any, out: dict[str, Any]) -> dict[str, Any]:
    """Every named type (record, enum, fixed) defined in ``schema``, by name and full name."""
    if isinstance(schema, list):
        for branch in schema:
            named_types(branch, out)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed") and "name" in schema:
            out[schema["name"]] = schema
            if schema.get("namespace"):
                out[f"{schema['namespace']}.{schema['name']}"] = schema
        for f in schema.get("fields", ()) if kind in ("record", "error") else ():
            named_types(f["type"], out)
        if kind == "array":
            named_types(schema["items"], out)
        elif kind == "map":
            named_types(schema["values"], out)
        elif isinstance(kind, (dict, list)):
            named_types(kind, out)
    return out


def resolve_type(schema: Any, named: dict[str, Any]) -> Any:
    """The schema behind a name reference or an optional union (["null", T])."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        schema = branches[0] if len(branches) == 1 else schema
    if isinstance(schema, str) and schema in named:
        return named[schema]
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return resolve_type(schema["type"], named)
    return schema


def field_names(record: dict[str, Any], ids: dict[str, int]) -> dict[str, str]:
    """Spec field name -> Avro field name, by field id first and name second."""
    by_id: dict[int, str] = {}
    names = set()
    for f in record.get("fields", ()):
        names.add(f["name"])
        if "field-id" in f:
            try:
                by_id[int(f["field-id"])] = f["name"]
            except (TypeError, ValueError):
                raise CorruptInputError(f"Avro field {f['name']!r} has a non-integer field-id") from None
    out: dict[str, str] = {}
    for spec_name, field_id in ids.items():
        if field_id in by_id:
            out[spec_name] = by_id[field_id]
        elif not by_id and spec_name in names:
            out[spec_name] = spec_name
        elif not by_id and _ALIASES.get(spec_name) in names:
            out[spec_name] = _ALIASES[spec_name]
    return out


def record_field(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in record["fields"] if f["name"] == name)


def avro_map(value: Any) -> dict[Any, Any] | None:
    # Int-keyed maps are arrays of 2-field key/value records (logicalType "map").
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    return dict(map(tuple, map(dict.values, value)))



# --------------------------------------------------------------------------- Avro values -> icectl values

_EPOCH_DATE = date(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_NAIVE = datetime(1970, 1, 1)
_MICRO = timedelta(microseconds=1)




def avro_value_converter(t: IcebergType) -> Callable[[Any], Any]:
    """Avro (as fastavro returns it) -> the icectl value of an Iceberg primitive type."""
    name = t.name if isinstance(t, PrimitiveType) else ""

    def convert(v: Any) -> Any:
        if v is None:
            return None
        try:
            if name == "date" and isinstance(v, date):
                return (v - _EPOCH_DATE).days
            if name == "time" and isinstance(v, time):
                return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
            if isinstance(v, datetime):  # timestamp-micros / local-timestamp-micros
                return (v - (_EPOCH_UTC if v.tzinfo else _EPOCH_NAIVE)) // _MICRO
            if isinstance(t, DecimalType):
                if isinstance(v, (bytes, bytearray)):  # no decimal logical type in the schema
                    return from_bytes(t, bytes(v))
                return decimal_from_unscaled(decimal_unscaled(v, t.scale), t.scale)
            if name == "uuid" and isinstance(v, (bytes, bytearray)):
                return uuid.UUID(bytes=bytes(v))
            if name == "uuid" and isinstance(v, str):
                return uuid.UUID(v)
            if name in ("float", "double"):
                return float(v)
            if name == "unknown":
                return None
        except (ValueError, TypeError, OverflowError) as e:
            raise CorruptInputError(f"invalid {t} partition value {v!r}: {e}") from None
        return v

    return convert


# --------------------------------------------------------------------------- writing


def _avro_name_char(c: str, first: bool) -> bool:
    # Java's Character.isLetter / isDigit (letters: Unicode L*, digits: Nd)
    return c.isalpha() or c == "_" or (not first and unicodedata.category(c) == "Nd")


def _sanitize_char(c: str) -> str:
    if unicodedata.category(c) == "Nd":
        return "_" + c
    # Java works on UTF-16 chars: a supplementary character is escaped as its two surrogates.
    units = c.encode("utf-16-be")
    return "".join(f"_x{int.from_bytes(units[i:i + 2], 'big'):X}" for i in range(0, len(units), 2))


def avro_field_name(name: str) -> str:
    """Java ``AvroSchemaUtil.sanitize``: the Avro name of a field whose Iceberg name is not valid Avro."""
    return "".join(c if _avro_name_char(c, i == 0) else _sanitize_char(c) for i, c in enumerate(name))


def _timestamp(unit: str, utc: bool) -> dict[str, Any]:
    return {"type": "long", "logicalType": f"timestamp-{unit}", "adjust-to-utc": utc}


# Appendix A / Java TypeToSchema for the unnamed types.
_AVRO_PRIMITIVES: dict[str, Any] = {
    "unknown": "null", "boolean": "boolean", "int": "int", "long": "long", "float": "float",
    "double": "double", "string": "string", "binary": "bytes",
    "date": {"type": "int", "logicalType": "date"}, "time": {"type": "long", "logicalType": "time-micros"},
    "timestamp": _timestamp("micros", False), "timestamptz": _timestamp("micros", True),
    "timestamp_ns": _timestamp("nanos", False), "timestamptz_ns": _timestamp("nanos", True),
}


def _option(schema: Any) -> Any:
    return schema if schema == "null" else ["null", schema]


class AvroSchemaBuilder:
    """Iceberg types to Avro schema JSON, as Java's ``TypeToSchema`` does.

    Named Avro types (fixed, decimal, uuid) may be defined once per schema; later uses refer to
    them by name, which is also what Java's schema printer emits.
    """

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def record(self, struct: StructType, name: str) -> dict[str, Any]:
        fields = []
        for f in struct.fields:
            avro_name = avro_field_name(f.name)
            out: dict[str, Any] = {"name": avro_name}
            t = self.convert(f.field_type, f.field_id)
            out["type"] = t if f.required else _option(t)
            if f.doc is not None:
                out["doc"] = f.doc
            if not f.required:
                out["default"] = None
            if avro_name != f.name:
                out["iceberg-field-name"] = f.name
            out["field-id"] = f.field_id
            fields.append(out)
        return {"type": "record", "name": name, "fields": fields}

    def convert(self, t: IcebergType, field_id: int) -> Any:
        if isinstance(t, StructType):
            return self.record(t, f"r{field_id}")
        if isinstance(t, ListType):
            element = self.convert(t.element_type, t.element_id)
            return {"type": "array", "items": element if t.element_required else _option(element),
                    "element-id": t.element_id}
        if isinstance(t, MapType):
            key = self.convert(t.key_type, t.key_id)
            value = self.convert(t.value_type, t.value_id)
            value = value if t.value_required else _option(value)
            if key == "string":
                return {"type": "map", "values": value, "key-id": t.key_id, "value-id": t.value_id}
            value_field: dict[str, Any] = {"name": "value", "type": value}
            if not t.value_required:
                value_field["default"] = None
            value_field["field-id"] = t.value_id
            items = {"type": "record", "name": f"k{t.key_id}_v{t.value_id}",
                     "fields": [{"name": "key", "type": key, "field-id": t.key_id}, value_field]}
            return {"type": "array", "items": items, "logicalType": "map"}
        return self.primitive(t)

    def named(self, schema: dict[str, Any]) -> Any:
        if schema["name"] in self.defined:
            return schema["name"]
        self.defined.add(schema["name"])
        return schema

    def primitive(self, t: IcebergType) -> Any:
        name = t.name if isinstance(t, PrimitiveType) else str(t)
        if name in _AVRO_PRIMITIVES:
            found = _AVRO_PRIMITIVES[name]
            return dict(found) if isinstance(found, dict) else found
        if name == "uuid":
            return self.named({"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"})
        if isinstance(t, FixedType):
            return self.named({"type": "fixed", "name": f"fixed_{t.length}", "size": t.length})
        if isinstance(t, DecimalType):
            return self.named({"type": "fixed", "name": f"decimal_{t.precision}_{t.scale}",
                               "size": decimal_required_bytes(t.precision), "logicalType": "decimal",
                               "precision": t.precision, "scale": t.scale})
        raise UnsupportedError(f"type {t} cannot be written to a manifest")


def decimal_required_bytes(precision: int) -> int:
    """Java ``TypeUtil.decimalRequiredBytes``: the smallest n with 2**(8n-1) > 10**precision - 1."""
    if not 0 <= precision <= 40:
        raise ValueError(f"decimal precision {precision} is out of range")
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


def compact_json(obj: Any) -> str:
    # Jackson's output: no spaces, non-ASCII left as is.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _compress(avro_codec: str, block: bytes) -> bytes:
    if avro_codec == "null":
        return block
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)  # Avro's deflate is raw
    return c.compress(block) + c.flush()


def write_avro_file(schema: dict[str, Any], records: Iterable[dict[str, Any]], metadata: dict[str, str],
               codec: str) -> bytes:
    """An Avro object container file (header with compact schema JSON, then blocks)."""
    avro_codec = _CODECS.get(codec.lower())
    if avro_codec is None:
        raise UnsupportedError(f"Avro codec {codec!r} is not supported for writing "
                               f"(supported: {', '.join(sorted(_CODECS))})")
    import fastavro

    header_schema, long_schema = _parsed_schemas()
    meta = {"avro.schema": compact_json(schema), "avro.codec": avro_codec, **metadata}
    out = io.BytesIO()
    sync = os.urandom(16)
    fastavro.schemaless_writer(out, header_schema, {
        "magic": AVRO_MAGIC, "meta": {k: v.encode() for k, v in meta.items()}, "sync": sync})
    parsed = fastavro.parse_schema(schema)
    block = io.BytesIO()
    count = 0

    def flush() -> None:
        nonlocal count
        data = _compress(avro_codec, block.getvalue())
        fastavro.schemaless_writer(out, long_schema, count)
        fastavro.schemaless_writer(out, long_schema, len(data))
        out.write(data + sync)
        block.seek(0)
        block.truncate()
        count = 0

    for record in records:
        fastavro.schemaless_writer(block, parsed, record)
        count += 1
        if block.tell() >= _SYNC_INTERVAL:
            flush()
    if count:
        flush()
    return out.getvalue()


def avro_partition_value(t: IcebergType, value: Any) -> Any:
    """An icectl partition value (see :mod:`icectl.spec.values`) as the Avro datum Java writes."""
    if value is None:
        return None
    name = t.name if isinstance(t, PrimitiveType) else ""
    if name in ("float", "double"):
        return float(value)
    if isinstance(t, DecimalType):
        # fixed of the precision's size, two's complement, sign-extended (Java DecimalConversion)
        size = decimal_required_bytes(t.precision)
        unscaled = decimal_unscaled(value, t.scale)
        try:
            return unscaled.to_bytes(size, "big", signed=True)
        except OverflowError:
            raise ValueError(f"decimal value {value} does not fit {t}") from None
    if name == "uuid":
        return to_bytes(t, value)
    if isinstance(t, FixedType):
        data = bytes(value)
        if len(data) != t.length:
            raise ValueError(f"a {t} value must be {t.length} bytes, got {len(data)}")
        return data
    if name == "binary":
        return bytes(value)
    if name == "unknown":
        return None
    return value
