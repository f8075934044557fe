"""The live rows of a data file, as Iceberg readers see them, in Arrow record batches.

A data file's columns are matched to the table's current schema by field id (the file's
``PARQUET:field_id``, or the table's name mapping for a file written without ids), so renamed,
added and promoted columns read as Spark reads them: a column the file lacks is null, an ``int``
column read as ``long`` is widened. The rows a deletion vector or a position delete file removes
are dropped, and so are the rows an equality delete file matches (null matching null). In a table
with row lineage (v3) every row also carries ``_row_id`` and ``_last_updated_sequence_number``: the
file's own value when it wrote one, else the inherited one (the data file's ``first_row_id`` plus
the row's position; the file's data sequence number), as the spec's "Row Lineage" section says,
so a rewrite keeps both.

Row groups stream one at a time: memory holds one row group of one file, not the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from icectl.codec.arrow_types import FIELD_ID_KEY, field_id_of, primitive_arrow_type
from icectl.codec.parquet_metrics import ROW_LINEAGE_FIELDS
from icectl.codec.puffin import decode_deletion_vector
from icectl.errors import CorruptInputError, IcectlError, UnsupportedError
from icectl.spec.manifest import DataFileContent
from icectl.spec.name_mapping import MappedField, NameMapping
from icectl.spec.schema import LONG, IcebergType, ListType, MapType, NestedField, Schema, StructType
from icectl.storage import FileIO
from icectl.table.scan_tasks import FileScanTask, ScanFile

ROW_ID = 2147483540
LAST_UPDATED_SEQUENCE_NUMBER = 2147483539
POS_DELETE_FILE_PATH = "file_path"  # field 2147483546 of a position delete file
POS_DELETE_POS = "pos"  # field 2147483545


def _field(field_id: int, name: str, arrow_type: pa.DataType, required: bool) -> pa.Field:
    return pa.field(name, arrow_type, nullable=not required, metadata={FIELD_ID_KEY: str(field_id).encode()})


def arrow_type(t: IcebergType) -> pa.DataType:
    """The Arrow type Iceberg Java writes ``t`` as, nested fields carrying their field ids."""
    if isinstance(t, StructType):
        return pa.struct([_field(f.field_id, f.name, arrow_type(f.field_type), f.required) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(_field(t.element_id, "element", arrow_type(t.element_type), t.element_required))
    if isinstance(t, MapType):
        return pa.map_(_field(t.key_id, "key", arrow_type(t.key_type), True),
                       _field(t.value_id, "value", arrow_type(t.value_type), t.value_required))
    return primitive_arrow_type(t, "columns")


def arrow_schema(schema: Schema, *, row_lineage: bool) -> pa.Schema:
    """The table schema as Arrow, with field ids; with the two row-lineage columns when asked."""
    fields = [_field(f.field_id, f.name, arrow_type(f.field_type), f.required) for f in schema.fields]
    if row_lineage:
        fields += [_field(fid, name, pa.int64(), False) for fid, name in sorted(ROW_LINEAGE_FIELDS.items(),
                                                                                  reverse=True)]
    return pa.schema(fields)


def _ids_by_name(mapping: NameMapping | None) -> dict[str, MappedField]:
    out: dict[str, MappedField] = {}
    for mf in mapping or ():
        for name in mf.names:
            out[name] = mf
    return out


def _file_ids(fields: list[pa.Field], mapping: NameMapping | None) -> dict[int, int]:
    """Field id -> index among ``fields`` (the file's own ids, else the name mapping's)."""
    by_name = _ids_by_name(mapping)
    out: dict[int, int] = {}
    for i, f in enumerate(fields):
        fid = field_id_of(f)
        if fid is None and f.name in by_name:
            fid = by_name[f.name].field_id
        if fid is not None:
            out[fid] = i
    return out


def _project(column: pa.Array, source: pa.Field, target: pa.Field, t: IcebergType,
             mapping: NameMapping | None) -> pa.Array:
    """``column`` (of the file's field ``source``) as the table's field ``target`` of type ``t``."""
    if isinstance(t, StructType):
        if not pa.types.is_struct(column.type):
            raise UnsupportedError(f"column {source.name} is not a struct in the data file")
        children = [column.type.field(i) for i in range(column.type.num_fields)]
        sub_mapping = None
        if mapping is not None:
            sub_mapping = next((mf.fields for mf in mapping if source.name in mf.names), None)
        ids = _file_ids(children, sub_mapping)
        arrays = []
        for f, tf in zip(t.fields, target.type, strict=True):
            i = ids.get(f.field_id)
            if i is None:
                arrays.append(pa.nulls(len(column), tf.type))
            else:
                arrays.append(_project(column.field(i), children[i], tf, f.field_type, sub_mapping))
        return pa.StructArray.from_arrays(arrays, fields=list(target.type), mask=column.is_null())
    if isinstance(t, ListType | MapType):
        try:
            return column.cast(target.type)  # element ids live in the type; names and widening by cast
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise UnsupportedError(f"column {source.name} cannot be read as {t}: {e}") from None
    if column.type == target.type:
        return column
    try:
        return column.cast(target.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise UnsupportedError(f"column {source.name} ({column.type}) cannot be read as {t}: {e}") from None


@dataclass(frozen=True)
class EqualityKeys:
    """The rows of equality delete files with one set of equality ids, as the current schema's
    top-level columns: a data row matching one of them in every column is deleted (null matches
    null, as Java's ``StructLikeSet`` compares)."""

    names: tuple[str, ...]  # the current schema's column names of the equality ids
    keys: pa.Table

    def keep(self, batch: pa.RecordBatch) -> pa.Array:
        """True for each row of ``batch`` no delete row matches."""
        if len(self.names) == 1:
            column = batch.column(batch.schema.get_field_index(self.names[0]))
            return pc.invert(pc.is_in(column, value_set=self.keys.column(0), skip_nulls=False))
        wanted = set(zip(*(self.keys.column(i).to_pylist() for i in range(len(self.names))), strict=True))
        rows = zip(*(batch.column(batch.schema.get_field_index(n)).to_pylist() for n in self.names), strict=True)
        return pa.array([r not in wanted for r in rows], pa.bool_())


class DeleteReader:
    """Reads the deletes of data files: DVs, position delete files (each read once) and equality
    delete files (each read once, projected onto the current schema)."""

    def __init__(self, io: FileIO, schema: Schema | None = None) -> None:
        self.io = io
        self.schema = schema if schema is not None else Schema(())  # None: positions only
        self._files: dict[str, dict[str, BitMap64]] = {}
        self._equality: dict[str, pa.Table] = {}

    def _position_file(self, path: str) -> dict[str, BitMap64]:
        if path not in self._files:
            try:
                with self.io.open(path) as f:
                    table = pq.read_table(f, columns=[POS_DELETE_FILE_PATH, POS_DELETE_POS])
            except (pa.ArrowInvalid, OSError, KeyError) as e:
                raise CorruptInputError(f"position delete file {path} cannot be read: {e}", path=path) from None
            by_file: dict[str, BitMap64] = {}
            paths = table.column(0).combine_chunks()
            positions = table.column(1).combine_chunks()
            for name in pc.unique(paths).to_pylist():
                mask = pc.equal(paths, name)
                by_file[name] = BitMap64(pc.filter(positions, mask).to_pylist())
            self._files[path] = by_file
        return self._files[path]

    def _dv(self, dv: ScanFile) -> BitMap64:
        f = dv.file
        if f.content_offset is None or f.content_size_in_bytes is None:
            raise CorruptInputError(f"deletion vector in {f.file_path} has no content offset or size",
                                    path=f.file_path)
        blob = self.io.read_range(f.file_path, f.content_offset, f.content_size_in_bytes)
        try:
            return decode_deletion_vector(blob, expected_cardinality=f.record_count)
        except CorruptInputError as e:
            raise CorruptInputError(f"deletion vector for {f.referenced_data_file} in {f.file_path}: {e.message}",
                                    path=f.file_path) from None

    def _equality_file(self, d: ScanFile) -> pa.Table:
        path = d.file.file_path
        if path not in self._equality:
            ids = d.file.equality_ids or ()
            fields = [self.schema.find_field(i) for i in ids]
            top = {f.field_id for f in self.schema.fields}
            if not ids or any(f is None or f.field_id not in top for f in fields):
                raise UnsupportedError(f"equality delete file {path} deletes by fields {list(ids)}, not top-level "
                                       "columns of the current schema", path=path,
                                       hint="rewrite this table's data files with Spark's rewrite_data_files")
            try:
                with self.io.open(path) as stream:
                    table = pq.read_table(stream)
            except (pa.ArrowInvalid, OSError) as e:
                raise CorruptInputError(f"equality delete file {path} cannot be read: {e}", path=path) from None
            present = _file_ids(list(table.schema), None)
            columns = []
            for field_ in fields:
                assert field_ is not None
                f = field_
                i = present.get(f.field_id)
                if i is None:
                    raise CorruptInputError(f"equality delete file {path} has no column for field {f.field_id} "
                                            f"({f.name})", path=path)
                target = _field(f.field_id, f.name, arrow_type(f.field_type), False)
                columns.append(_project(table.column(i).combine_chunks(), table.schema.field(i), target,
                                        f.field_type, None))
            self._equality[path] = pa.table(columns, names=[f.name for f in fields if f is not None])
        return self._equality[path]

    def equality(self, task: FileScanTask) -> list[EqualityKeys]:
        """The task's equality deletes, one key set per set of equality ids."""
        by_ids: dict[tuple[int, ...], list[pa.Table]] = {}
        for d in task.equality_deletes:
            by_ids.setdefault(tuple(d.file.equality_ids or ()), []).append(self._equality_file(d))
        out = []
        for tables in by_ids.values():
            keys = pa.concat_tables(tables)
            out.append(EqualityKeys(tuple(keys.column_names), keys))
        return out

    def positions(self, task: FileScanTask) -> BitMap64:
        """The deleted positions of the task's data file (equality deletes are not positions)."""
        out = self._dv(task.dv) if task.dv is not None else BitMap64()
        for d in task.position_deletes:
            if d.file.content == DataFileContent.POSITION_DELETES:
                out |= self._position_file(d.file.file_path).get(task.data.file.file_path, BitMap64())
        return out


def live_batches(io: FileIO, task: FileScanTask, schema: Schema, target: pa.Schema, deletes: DeleteReader,
                 mapping: NameMapping | None, *, row_lineage: bool) -> Iterator[pa.RecordBatch]:
    """The task's data file, one record batch per row group, as ``target`` rows, deleted rows dropped."""
    deleted = deletes.positions(task)
    equality = deletes.equality(task)
    path = task.data.file.file_path
    data = task.data.file
    try:
        with io.open(path) as f:
            pfile = pq.ParquetFile(f)
            file_fields = list(pfile.schema_arrow)
            ids = _file_ids(file_fields, mapping)
            wanted = sorted(set(ids.values()))
            positions = pa.array(deleted.to_array(), pa.int64())
            start = 0
            for g in range(pfile.metadata.num_row_groups):
                batch = pfile.read_row_group(g, columns=[file_fields[i].name for i in wanted])
                n = batch.num_rows
                by_index = dict(zip(wanted, batch.columns, strict=True))
                columns: list[pa.Array] = []
                for tf, f_ in zip(target, (*schema.fields, *_lineage_fields(row_lineage)), strict=True):
                    i = ids.get(f_.field_id)
                    if i is None:
                        columns.append(pa.nulls(n, tf.type))
                        continue
                    col = by_index[i].combine_chunks()
                    columns.append(_project(col, file_fields[i], tf, f_.field_type, mapping))
                if row_lineage:
                    columns[-2] = _inherit(columns[-2], data.first_row_id, start, n)
                    columns[-1] = _inherit(columns[-1], task.data.data_sequence_number, None, n)
                out = pa.RecordBatch.from_arrays(columns, schema=target)
                keep: pa.Array | None = None
                if deleted.range_cardinality(start, start + n):
                    index = pa.array(range(start, start + n), pa.int64())
                    keep = pc.invert(pc.is_in(index, value_set=positions))
                for keys in equality:
                    more = keys.keep(out)
                    keep = more if keep is None else pc.and_(keep, more)
                if keep is not None:
                    out = out.filter(keep)
                start += n
                if out.num_rows:
                    yield out
    except IcectlError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        raise _unreadable(path, e) from None
    _check_rows(path, start, data.record_count)


def equality_deleted_positions(io: FileIO, task: FileScanTask, schema: Schema, deletes: DeleteReader,
                               mapping: NameMapping | None) -> BitMap64:
    """The positions of the task's data file whose rows its equality deletes match (the rows they
    delete, whether or not a position delete or DV deletes them too), reading only the equality
    columns, one row group at a time."""
    equality = deletes.equality(task)
    if not equality:
        return BitMap64()
    by_name = {f.name: f for f in schema.fields}
    fields = [by_name[n] for n in sorted({n for keys in equality for n in keys.names})]
    target = pa.schema([_field(f.field_id, f.name, arrow_type(f.field_type), False) for f in fields])
    path = task.data.file.file_path
    out = BitMap64()
    start = 0
    try:
        with io.open(path) as f:
            pfile = pq.ParquetFile(f)
            file_fields = list(pfile.schema_arrow)
            ids = _file_ids(file_fields, mapping)
            wanted = sorted({ids[f_.field_id] for f_ in fields if f_.field_id in ids})
            for g in range(pfile.metadata.num_row_groups):
                batch = pfile.read_row_group(g, columns=[file_fields[i].name for i in wanted])
                n = batch.num_rows
                by_index = dict(zip(wanted, batch.columns, strict=True))
                columns = [pa.nulls(n, tf.type) if ids.get(f_.field_id) is None else
                           _project(by_index[ids[f_.field_id]].combine_chunks(), file_fields[ids[f_.field_id]], tf,
                                    f_.field_type, mapping)
                           for tf, f_ in zip(target, fields, strict=True)]
                rows = pa.RecordBatch.from_arrays(columns, schema=target)
                keep: pa.Array | None = None
                for keys in equality:
                    more = keys.keep(rows)
                    keep = more if keep is None else pc.and_(keep, more)
                assert keep is not None
                hits = pc.indices_nonzero(pc.invert(keep))
                if len(hits):
                    out.update(pc.add(hits, pa.scalar(start, pa.uint64())).to_numpy())
                start += n
    except IcectlError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        raise _unreadable(path, e) from None
    _check_rows(path, start, task.data.file.record_count)
    return out


def _unreadable(path: str, e: Exception) -> CorruptInputError:
    return CorruptInputError(f"data file {path} cannot be read: {e}", path=path,
                             hint="the file is damaged or not Parquet; restore it or remove it from the table")


def _check_rows(path: str, read: int, expected: int) -> None:
    """A data file holds as many rows as its manifest entry says (else positions would be wrong)."""
    if read != expected:
        raise CorruptInputError(f"data file {path} has {read} rows, its manifest entry says {expected}", path=path)


def _lineage_fields(row_lineage: bool) -> tuple[NestedField, ...]:
    if not row_lineage:
        return ()
    return tuple(NestedField(fid, name, LONG) for fid, name in sorted(ROW_LINEAGE_FIELDS.items(), reverse=True))


def _inherit(column: pa.Array, base: int | None, start: int | None, n: int) -> pa.Array:
    """Null values of a row-lineage column filled as the spec inherits them: ``base + position``
    for ``_row_id`` (``start`` is the batch's first position), ``base`` for the sequence number."""
    if base is None or column.null_count == 0:
        return column
    fill: Any = (pa.array(range(base + start, base + start + n), pa.int64()) if start is not None
                 else pa.scalar(base, pa.int64()))
    return pc.if_else(pc.is_null(column), fill, column)
