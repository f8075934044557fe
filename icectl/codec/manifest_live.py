"""The live files of many manifests at once, as Arrow columns: what reachability needs of a
manifest (each live entry's ``file_path`` and ``content``), decoded natively in batches.

A table of 20,000 manifests of 100 entries costs the native decoder's fixed cost (a temporary
file, a query, the length check's kernels: ~5 ms) 20,000 times when each manifest is read by
itself. Here manifests with the same writer schema and codec are joined into one container and
decoded in one read (:func:`icectl.codec.avro_native.read_avro_tables`), each file's blocks checked
as in a read of its own. The schema checks are the reader's own (:func:`open_manifest`, once per
distinct header). Where a group cannot be decoded so (any error, a damaged block, a value the
reader would refuse), its manifests get ``None``: the caller reads them one by one, and the
reader's errors are the ones reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from icectl.codec.avro import container_header
from icectl.codec.avro_native import read_avro_joined
from icectl.codec.manifest_reader import open_manifest
from icectl.spec.schema import StructType

if TYPE_CHECKING:
    import pyarrow as pa

# What reachability reads of a data_file (the reader's projection for it).
FIELDS = frozenset({"content", "file_path", "file_format"})


def live_files(datas: Sequence[bytes], partition_types: Sequence[StructType], format_version: int,
               ) -> list[tuple[pa.Array, pa.Array] | None]:
    """For each manifest: (``file_path``, ``content`` as int8) of its ADDED and EXISTING entries, in
    order; ``None`` for one this path leaves to the reader."""
    out: list[tuple[pa.Array, pa.Array] | None] = [None] * len(datas)
    # Grouped by the whole header metadata (not only the writer schema): the reader's checks of
    # it (open_manifest, once a group) then hold for every member.
    groups: dict[tuple[bytes, StructType], list[int]] = {}
    for i, (data, ptype) in enumerate(zip(datas, partition_types, strict=True)):
        try:
            end, _sync, _meta = container_header(data)
        except Exception:  # the reader names the damage
            continue
        groups.setdefault((data[:end - 16], ptype), []).append(i)
    for (_meta_bytes, ptype), members in groups.items():
        try:
            layout = open_manifest(datas[members[0]], partition_type=ptype, format_version=format_version,
                                   fields=FIELDS)
            raw, rows = read_avro_joined([datas[i] for i in members], layout.schema)
            paths, content, live = _live(raw, layout.entry_names["status"], layout.entry_names["data_file"],
                                         layout.file_names)
            # Each manifest's live rows lie between the live counts before its first and after its last row.
            counted = np.concatenate([[0], np.cumsum(live.to_numpy(zero_copy_only=False), dtype=np.int64)])
            bounds = counted[np.concatenate([[0], np.cumsum(rows, dtype=np.int64)])]
            for k, i in enumerate(members):
                lo, hi = int(bounds[k]), int(bounds[k + 1])
                out[i] = (paths.slice(lo, hi - lo), content.slice(lo, hi - lo))
        except Exception:  # NotNative, the decoder's own error, a value the reader refuses: one by one
            for i in members:
                out[i] = None
    return out


def _live(raw: pa.Table, status_name: str, data_file_name: str, file_names: dict[str, str]
          ) -> tuple[pa.Array, pa.Array, pa.BooleanArray]:
    """The live rows' (file_path, content), and which rows are live; raises where the reader
    would refuse a row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = raw.num_rows
    status = raw.column(status_name).combine_chunks().cast(pa.int8())
    data_file = raw.column(data_file_name).combine_chunks()
    if data_file.null_count or not pa.types.is_struct(data_file.type):
        raise ValueError("data_file is not a plain record")
    fields = {data_file.type.field(i).name: i for i in range(data_file.type.num_fields)}
    path = data_file.field(fields[file_names["file_path"]])
    content = (data_file.field(fields[file_names["content"]]).cast(pa.int8()) if "content" in file_names
               else pa.repeat(pa.scalar(0, pa.int8()), n))
    codes = pa.array([0, 1, 2], pa.int8())
    if n and not (pc.all(pc.is_in(status, codes)).as_py() and pc.all(pc.is_in(content, codes)).as_py()):
        raise ValueError("invalid status or content")
    if path.null_count:
        raise ValueError("a null file_path")
    live = pc.not_equal(status, 2)
    return path.filter(live), content.filter(live), live


__all__ = ["FIELDS", "live_files"]
