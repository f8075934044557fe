"""The metric columns of ``inspect files|entries --json --metrics`` as JSON text, built from a
batch's Arrow map columns rather than row by row.

For each of the six int-keyed maps the text of a row (``{"1": 42, ...}``) is built by Arrow's
string kernels from the flattened keys and values; ``readable_metrics`` takes each schema
column's value out of every map with one numpy scatter per map, and decodes bounds a column at a
time: ints, longs, floats, doubles, dates, timestamps and strings in bulk, any other type once per
distinct (field, bytes) value by the row path's own formatter. Whatever this does not handle
exactly (a duplicated map key, a bound of an odd length, a string JSON must escape...) makes
:func:`metric_pieces` return None, and the caller renders the batch row by row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from icectl.spec.schema import NestedField, PrimitiveType

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

COUNT_MAPS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
BOUND_MAPS = ("lower_bounds", "upper_bounds")
_READABLE = ("column_size", "value_count", "null_value_count", "nan_value_count")

# json.dumps escapes these in strings (ensure_ascii=False leaves everything else as is).
JSON_ESCAPED = r'["\\\x00-\x1f]'
_SAFE_BYTES = bytes(b for b in range(256) if b >= 0x20 and b not in b'"\\')  # UTF-8 text passes as is


def needs_json_escaping(column: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a value of a string column holds a byte JSON escapes (``JSON_ESCAPED``: a quote, a
    backslash, a control character). Each chunk's data buffer is checked at once (``bytes.translate``
    keeps the bytes outside ``_SAFE_BYTES``), ~20x a regex run per value; bytes under a null slot
    count too, which can only send a chunk to the exact row-by-row path, never past it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        if not len(chunk):
            continue
        if pa.types.is_string_view(chunk.type):  # no single data buffer (and no regex kernel)
            chunk = chunk.cast(pa.large_string())
        large = pa.types.is_large_string(chunk.type)
        if not (large or pa.types.is_string(chunk.type)):
            if pc.any(pc.match_substring_regex(chunk, JSON_ESCAPED)).as_py():
                return True
            continue
        _validity, offsets, data = chunk.buffers()
        if data is None:
            continue
        bounds = memoryview(offsets).cast("q" if large else "i")
        start, end = bounds[chunk.offset], bounds[chunk.offset + len(chunk)]
        if memoryview(data)[start:end].tobytes().translate(None, _SAFE_BYTES):
            return True
    return False

# datetime's range (years 1-9999) in microseconds from the epoch: outside it the row path shows the
# raw integer, which the bulk path does not reproduce.
_MIN_MICROS, _MAX_MICROS = -62135596800000000, 253402300799999999
_MIN_DAYS, _MAX_DAYS = -719162, 2932896

Texts = Callable[[NestedField, bytes], str]  # the row path's JSON of one bound (decoded, formatted)


class Unusual(Exception):  # a batch the bulk path does not render exactly: render it row by row
    pass


def metric_pieces(t: pa.Table, columns: list[tuple[int, str, NestedField]], bound_text: Texts,
                  encode: Callable[[Any], str]) -> list[Any] | None:
    """The pieces (strings and string arrays of ``t.num_rows``) that follow a file row's last
    column: ``, "column_sizes": {...}, ..., "readable_metrics": {...}``, as
    ``json.dumps`` writes :func:`icectl.ops.inspect.files.file_row`'s. ``columns``: the schema's
    primitive columns (id, name, field); ``bound_text``: the row path's text of one bound."""
    try:
        return _pieces(t, columns, bound_text, encode)
    except Unusual:
        return None


def _pieces(t: pa.Table, columns: list[tuple[int, str, NestedField]], bound_text: Texts,
            encode: Callable[[Any], str]) -> list[Any]:
    import pyarrow as pa

    n = t.num_rows
    if len({name for _, name, _ in columns}) != len(columns):
        raise Unusual  # two columns of one name: the row's dict keeps one
    fids = pa.array([fid for fid, _, _ in columns], pa.int32())
    maps = {name: _FlatMap(t.column(name).combine_chunks(), n, fids) for name in (*COUNT_MAPS, *BOUND_MAPS)}
    count_texts = {name: _num(maps[name].values) for name in COUNT_MAPS}
    pieces: list[Any] = []
    for name in COUNT_MAPS:
        pieces += [f', "{name}": ', maps[name].text(count_texts[name])]
    for name in BOUND_MAPS:
        pieces += [f', "{name}": ', maps[name].text(_quote(hex_strings(maps[name].values)))]
    pieces.append(', "readable_metrics": {')
    # Each map's items with a null after them: what a row without the column takes.
    padded = {name: _padded(count_texts[name] if name in count_texts else maps[name].values) for name in maps}
    for j, (_fid, name, field) in enumerate(columns):
        pieces.append(("" if j == 0 else ", ") + encode(name) + ": {")
        for k, (map_name, label) in enumerate(zip(COUNT_MAPS, _READABLE, strict=True)):
            counts = maps[map_name].column(j, padded[map_name])
            pieces += [("" if k == 0 else ", ") + f'"{label}": ', _or_null(counts)]
        for map_name, label in zip(BOUND_MAPS, ("lower_bound", "upper_bound"), strict=True):
            raw = maps[map_name].column(j, padded[map_name])
            pieces += [f', "{label}": ', _or_null(_bound_texts(field, raw, bound_text))]
        pieces.append("}")
    pieces.append("}")
    return pieces


class _FlatMap:
    """One int-keyed map column, flattened: keys, values, the row of each item, and per schema
    column the index of the row's item (``n_items``, a null, where the row has none)."""

    def __init__(self, arr: pa.Array, n: int, fids: pa.Array) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        self.arr = arr
        offsets = np.asarray(arr.offsets, np.int64)  # of this slice, into the whole children
        lengths = np.diff(offsets)
        if arr.null_count and lengths[arr.is_null().to_numpy(zero_copy_only=False)].any():
            raise Unusual  # a null map over items (Arrow allows it; the decoder never writes it)
        start, size = int(offsets[0]), int(offsets[-1] - offsets[0])
        keys, self.values = arr.keys.slice(start, size), arr.items.slice(start, size)
        self.keys = keys
        parent = np.repeat(np.arange(n, dtype=np.int64), lengths)
        k = keys.to_numpy(zero_copy_only=False).astype(np.int64)
        if len(k) > 1:
            same_row = parent[1:] == parent[:-1]
            # Java writes each map in key order; otherwise a duplicated key would collapse in the dict.
            if not (np.diff(k)[same_row] > 0).all() and len(np.unique(parent * 2**33 + k)) != len(k):
                raise Unusual
        col = pc.index_in(keys, value_set=fids)
        found = col.is_valid().to_numpy(zero_copy_only=False)
        self.index = np.full((len(fids), n), len(k), dtype=np.int64)
        self.index[col.to_numpy(zero_copy_only=False)[found].astype(np.int64), parent[found]] = np.nonzero(found)[0]
        self.offsets = pa.array((offsets - start).astype(np.int32), pa.int32())

    def text(self, value_texts: pa.Array) -> pa.Array:
        """Each row's map as JSON (``{"1": v, ...}``, ``null`` for no map)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        items = pc.binary_join_element_wise('"', pc.cast(self.keys, pa.string()), '": ', value_texts, "")
        rows = pa.ListArray.from_arrays(self.offsets, items, mask=self.arr.is_null())
        return pc.fill_null(pc.binary_join_element_wise("{", pc.binary_join(rows, ", "), "}", ""), "null")

    def column(self, j: int, padded: pa.Array) -> pa.Array:
        """Per row, the item of schema column ``j`` (``padded``: one per map item, then a null for
        rows without one)."""
        import pyarrow as pa

        return padded.take(pa.array(self.index[j]))


def _padded(items: pa.Array) -> pa.Array:
    import pyarrow as pa

    return pa.concat_arrays([items, pa.nulls(1, items.type)])


def _num(values: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.fill_null(pc.cast(values, pa.string()), "null")


def _quote(texts: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.fill_null(pc.binary_join_element_wise('"', texts, '"', ""), "null")


def _or_null(texts: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.fill_null(texts, "null")


def hex_strings(values: pa.Array) -> pa.Array:
    """Each binary value as lowercase hex (``bytes.hex()``), nulls kept."""
    import numpy as np
    import pyarrow as pa

    values = values.cast(pa.binary())
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32)[values.offset:values.offset + len(values) + 1].astype(np.int64)
    data = (np.frombuffer(data_buf, np.uint8)[offsets[0]:offsets[-1]] if data_buf is not None
            else np.zeros(0, np.uint8))
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    out = np.empty(2 * len(data), np.uint8)
    out[0::2], out[1::2] = digits[data >> 4], digits[data & 15]
    new_offsets = ((offsets - offsets[0]) * 2).astype(np.int32)
    text = pa.StringArray.from_buffers(len(values), pa.py_buffer(new_offsets), pa.py_buffer(out))
    return _keep_nulls(values, text)


def _keep_nulls(values: pa.Array, text: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.if_else(values.is_null(), None, text) if values.null_count else text


# --------------------------------------------------------------------------- bounds of one column


def _bound_texts(field: NestedField, raw: pa.Array, bound_text: Texts) -> pa.Array:
    """The JSON of each row's bound of one column (null where none), as the row path writes it."""
    import numpy as np
    import pyarrow as pa

    present = raw.drop_null()
    if len(present) == 0:
        return pa.nulls(len(raw), pa.string())
    texts = _bulk(field, present)
    if texts is None:
        texts = _each_distinct(field, present, bound_text)
    if len(present) == len(raw):
        return texts
    valid = raw.is_valid().to_numpy(zero_copy_only=False)
    positions = np.cumsum(valid) - 1
    return texts.take(pa.array(positions, mask=~valid))


def _each_distinct(field: NestedField, present: pa.Array, bound_text: Texts) -> pa.Array:
    import pyarrow as pa

    encoded = present.dictionary_encode()
    texts = [bound_text(field, raw) for raw in encoded.dictionary.to_pylist()]
    return pa.array(texts, pa.string()).take(encoded.indices)


def _fixed(present: pa.Array, width: int, dtype: str) -> np.ndarray | None:
    """The values as numbers when every one is ``width`` bytes long (little-endian)."""
    import numpy as np
    import pyarrow.compute as pc

    lengths = pc.binary_length(present)
    bounds = pc.min_max(lengths)
    if bounds["min"].as_py() != width or bounds["max"].as_py() != width:
        return None
    start = int(np.frombuffer(present.buffers()[1], np.int32)[present.offset])
    return np.frombuffer(present.buffers()[2], np.dtype(dtype), count=len(present), offset=start)


def _bulk(field: NestedField, present: pa.Array) -> pa.Array | None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    name = field.field_type.name if isinstance(field.field_type, PrimitiveType) else ""
    if name in ("int", "long"):
        ints = _fixed(present, 4, "<i4") if name == "int" else (
            _fixed(present, 8, "<i8") if (v := _fixed(present, 4, "<i4")) is None else v)
        return None if ints is None else pa.array(ints).cast(pa.string())
    if name in ("float", "double"):
        floats = _fixed(present, 4, "<f4") if name == "float" else (
            _fixed(present, 8, "<f8") if (v := _fixed(present, 4, "<f4")) is None else v)
        if floats is None:
            return None
        as_double = floats.astype(np.float64)
        texts = list(map(float.__repr__, as_double.tolist()))
        if not np.isfinite(as_double).all():
            for i in np.nonzero(~np.isfinite(as_double))[0]:
                f = as_double[i]
                texts[i] = '"NaN"' if np.isnan(f) else ('"Infinity"' if f > 0 else '"-Infinity"')
        return pa.array(texts, pa.string())
    if name == "date":
        days = _fixed(present, 4, "<i4")
        if days is None or not ((days >= _MIN_DAYS) & (days <= _MAX_DAYS)).all():
            return None
        return _quote(pa.array(days).cast(pa.date32()).cast(pa.string()))
    if name in ("timestamp", "timestamptz"):
        micros = _fixed(present, 8, "<i8")
        if micros is None or not ((micros >= _MIN_MICROS) & (micros <= _MAX_MICROS)).all():
            return None
        # Arrow's cast writes "YYYY-MM-DD HH:MM:SS.ffffff", as isoformat(timespec="microseconds")
        # with a space (10x faster than its strftime).
        iso = pc.replace_substring(pa.array(micros).cast(pa.timestamp("us")).cast(pa.string()), " ", "T",
                                   max_replacements=1)
        return pc.binary_join_element_wise('"', iso, '+00:00"' if name == "timestamptz" else '"', "")
    if name == "string":
        try:
            strings = present.cast(pa.string())  # checks UTF-8 (the row path raises on invalid)
        except pa.ArrowInvalid:
            return None
        if needs_json_escaping(strings):
            return None
        return _quote(strings)
    return None
