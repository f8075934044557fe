"""The read path: a snapshot's manifest list, then its manifests' entries, fetched in parallel.

Manifests are read concurrently (I/O-bound, above all on object storage) but yielded in
manifest-list order, with at most a few manifests decoded ahead, so a table is streamed and
never held whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from icectl import progress
from icectl.codec.avro import container_header, probe_avro_file
from icectl.codec.avro_native import native_enabled
from icectl.codec.manifest_arrow import decode_key
from icectl.codec.manifest_batch import manifest_tables
from icectl.codec.manifest_reader import read_manifest_metadata
from icectl.codec.v4_manifest import probe_parquet_file
from icectl.errors import CorruptInputError, IcectlError, NotFoundError
from icectl.spec.manifest import ManifestContent, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import StructType
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIdentity, FileIO
from icectl.table.manifest_cache import manifest_cache
from icectl.table.manifest_read import (
    MANIFEST_KIND,
    ReadOptions,
    batch_options,
    cached_table,
    manifest_arrow,
    manifest_entries,
    manifest_list,
)
from icectl.table.scan_v4 import TreeManifest, read_tree_entries, tree_manifests, v4_leaf_reader
from icectl.threads import READ_WORKERS, ordered_map

if TYPE_CHECKING:
    import pyarrow as pa

_T = TypeVar("_T")


def manifests_of(metadata: TableMetadata, snapshot: Snapshot, io: FileIO, *,
                 use_cache: bool = True) -> list[ManifestFile]:
    """The manifests of a snapshot: its manifest list, or a v1 snapshot's embedded ``manifests``, or
    a v4 snapshot's leaves and root-level file groups (:mod:`icectl.table.scan_v4`).
    ``use_cache=False``: read the manifest list itself, not the manifest cache."""
    if snapshot.manifest_list:
        return list(manifest_list(io, snapshot.manifest_list, format_version=metadata.format_version,
                                  use_cache=use_cache))
    if snapshot.manifests is not None:
        return [_embedded_manifest(path, io) for path in snapshot.manifests]
    if snapshot.root_manifest:
        return list(tree_manifests(metadata, snapshot, io))  # v4: leaves and root-level files
    raise CorruptInputError(f"snapshot {snapshot.snapshot_id} has neither manifest-list nor manifests")


def _embedded_manifest(path: str, io: FileIO) -> ManifestFile:
    # v1 snapshots may list manifest paths directly; the spec id lives in the manifest's metadata.
    try:
        meta = read_manifest_metadata(io.read(path))
    except IcectlError as e:
        raise e.in_file(path) from None
    spec_id = int(meta.get("partition-spec-id", "0") or 0)
    return ManifestFile(manifest_path=path, manifest_length=io.size(path), partition_spec_id=spec_id)


def _read_entries(metadata: TableMetadata, io: FileIO, manifest: ManifestFile, ptype: StructType,
                  fields: frozenset[str] | None, options: ReadOptions) -> list[ManifestEntry]:
    if isinstance(manifest, TreeManifest):  # part of a v4 snapshot: manifest DVs, root-level files
        return read_tree_entries(metadata, io, manifest, ptype, fields, options=options)
    return manifest_entries(io, manifest, partition_type=ptype, format_version=metadata.format_version,
                            fields=fields, options=options)


def iter_entries(
    metadata: TableMetadata,
    io: FileIO,
    manifests: Iterable[ManifestFile],
    *,
    fields: Iterable[str] | None = None,
    live_only: bool = False,
    workers: int = READ_WORKERS,
    use_cache: bool = True,
) -> Iterator[tuple[ManifestFile, ManifestEntry]]:
    """Entries of the given manifests, in order, each with the manifest it came from.

    ``fields`` limits the ``data_file`` fields converted (see ``read_manifest``); ``live_only``
    drops DELETED entries; ``use_cache=False`` decodes the files themselves (``validate --deep``).
    Manifests are read by threads and, for a big batch, decoded in worker processes
    (:mod:`icectl.table.manifest_read`).
    """
    wanted = frozenset(fields) if fields is not None else None

    def read(m: ManifestFile, ptype: StructType, options: ReadOptions) -> list[ManifestEntry]:
        return _read_entries(metadata, io, m, ptype, wanted, options)

    for m, entries in _read_ahead(metadata, manifests, read, workers, use_cache):
        for e in entries:
            if live_only and not e.is_live:
                continue
            yield m, e


def iter_manifest_tables(
    metadata: TableMetadata, io: FileIO, manifests: Iterable[ManifestFile], *,
    workers: int = READ_WORKERS, use_cache: bool = True, fill_cache: bool = True,
) -> Iterator[tuple[ManifestFile, pa.Table | list[ManifestEntry]]]:
    """Each manifest as its Arrow table (:func:`icectl.codec.manifest_arrow.manifest_table`: every
    entry, DELETED ones included), in order; as entries when it has no table (a v4 root group or
    leaf with a manifest DV, a manifest the Arrow form cannot hold). Streams like :func:`iter_entries`.
    ``fill_cache=False``: tables decoded together are not stored (manifests about to be replaced:
    storing 20,000 of them took longer than decoding them)."""

    def read(m: ManifestFile, ptype: StructType, options: ReadOptions) -> pa.Table | list[ManifestEntry]:
        if isinstance(m, TreeManifest) and (m.is_root_group or m.deleted_positions):
            return read_tree_entries(metadata, io, m, ptype, options=options)
        return manifest_arrow(io, m, partition_type=ptype, format_version=metadata.format_version,
                              options=options,
                              other_format=v4_leaf_reader(metadata, m, ptype) if isinstance(m, TreeManifest) else None)

    todo = list(manifests)
    if native_enabled() and len(todo) > 1 and not any(isinstance(m, TreeManifest) for m in todo):
        yield from _read_batched(metadata, io, todo, read, workers, use_cache, fill_cache)
    else:
        yield from _read_ahead(metadata, todo, read, workers, use_cache)


_BATCH_BYTES = 4 << 20
_FIRST_BATCH_BYTES = 512 << 10


def _read_batched(metadata: TableMetadata, io: FileIO, todo: list[ManifestFile],
                  read: Callable[[ManifestFile, StructType, ReadOptions], pa.Table | list[ManifestEntry]],
                  workers: int, use_cache: bool, fill_cache: bool = True
                  ) -> Iterator[tuple[ManifestFile, pa.Table | list[ManifestEntry]]]:
    """:func:`iter_manifest_tables` in batches of up to 512 manifests or 16 MB: the cached tables
    taken from the cache, the others decoded together in one native read per shared header
    (:func:`icectl.codec.manifest_batch.manifest_tables`) and cached. A group that does not decode
    so is read one by one by ``read`` (the reader's errors, the reader's fallback)."""
    ptypes = {sid: metadata.partition_type(sid) for sid in {m.partition_spec_id for m in todo}}
    options = ReadOptions(use_cache=use_cache)
    cache = manifest_cache() if use_cache else None

    def batches() -> Iterator[list[ManifestFile]]:
        # The first batches are small and each one doubles up to 4 MB: the consumer (a view rendering
        # JSON) starts on the first tables while the rest decode, instead of waiting for a whole
        # round of full batches (100 manifests of 146 KB: the first table after 0.05 s, not 0.3 s).
        batch: list[ManifestFile] = []
        size, limit = 0, _FIRST_BATCH_BYTES
        for m in todo:
            batch.append(m)
            size += max(0, m.manifest_length)
            if len(batch) >= 256 or size >= limit:
                yield batch
                batch, size, limit = [], 0, min(2 * limit, _BATCH_BYTES)
        if batch:
            yield batch

    def one_batch(batch: list[ManifestFile]) -> list[pa.Table | list[ManifestEntry]]:
        got: list[pa.Table | list[ManifestEntry] | None] = [None] * len(batch)
        fresh: dict[tuple[bytes, int], list[tuple[int, bytes, FileIdentity | None]]] = {}
        for i, m in enumerate(batch):
            key = decode_key(m, ptypes[m.partition_spec_id], metadata.format_version)
            try:
                found = cached_table(cache, io, m.manifest_path, key) if cache is not None else None
                if found is not None:
                    got[i] = found
                    continue
                data, identity = io.read_with_identity(m.manifest_path) if cache is not None \
                    else (io.read(m.manifest_path), None)
                end = container_header(data)[0]
            except Exception:  # missing, unreadable, not Avro: the one-by-one read says what
                continue
            fresh.setdefault((data[:end - 16], m.partition_spec_id), []).append((i, data, identity))
        for (_header, spec_id), members in fresh.items():
            try:
                tables = manifest_tables([d for _, d, _ in members], [batch[i] for i, _, _ in members],
                                         ptypes[spec_id], metadata.format_version)
            except Exception:  # the one-by-one read decides (and names the error)
                continue
            for (i, _data, identity), table in zip(members, tables, strict=True):
                got[i] = table
                if cache is not None and identity is not None and fill_cache:
                    cache.put(MANIFEST_KIND, batch[i].manifest_path, identity, table)
        return [g if g is not None else read(m, ptypes[m.partition_spec_id], options)
                for m, g in zip(batch, got, strict=True)]

    with progress.task("reading manifests", len(todo)) as advance:
        chunks = list(batches())
        for batch, tables in zip(chunks, ordered_map(one_batch, chunks, workers=workers), strict=True):
            yield from zip(batch, tables, strict=True)
            advance(len(batch))


def _read_ahead(metadata: TableMetadata, manifests: Iterable[ManifestFile],
                read: Callable[[ManifestFile, StructType, ReadOptions], _T], workers: int,
                use_cache: bool) -> Iterator[tuple[ManifestFile, _T]]:
    """``read`` of each manifest, in threads, yielded in order with a bounded read-ahead."""
    todo = list(manifests)
    if not todo:
        return
    ptypes = {sid: metadata.partition_type(sid) for sid in {m.partition_spec_id for m in todo}}
    options = batch_options(todo, use_cache=use_cache)
    with progress.task("reading manifests", len(todo)) as advance:
        # bounded read-ahead (icectl.threads.ordered_map): memory stays flat however big the table
        for m, got in zip(todo, ordered_map(lambda m: read(m, ptypes[m.partition_spec_id], options), todo,
                                            workers=workers), strict=True):
            advance(1)
            yield m, got


def data_manifests(manifests: Iterable[ManifestFile]) -> list[ManifestFile]:
    return [m for m in manifests if m.content == ManifestContent.DATA]


def delete_manifests(manifests: Iterable[ManifestFile]) -> list[ManifestFile]:
    return [m for m in manifests if m.content == ManifestContent.DELETES]


def check_manifests_intact(io: FileIO, manifests: Sequence[ManifestFile], listed_in: str | None,
                           workers: int = READ_WORKERS, *, probe: bool = True) -> None:
    """Refuse (:class:`CorruptInputError`, naming the first in list order) unless every manifest
    exists, is ``manifest_length`` bytes long and opens as Avro (magic, header and the trailing sync
    marker: :func:`probe_avro_file`) or, a v4 leaf, as Parquet (magic at both ends and a footer that
    fits: :func:`probe_parquet_file`), two small reads each. Records are not decoded, so this is cheap
    enough for the manifests a writer carries into a new snapshot without reading them.
    ``probe=False``: the length alone, for manifests the caller decodes whole anyway."""
    if not manifests:
        return

    def one(m: ManifestFile) -> str | None:
        path = m.manifest_path
        try:
            size = io.size(path)
            if size != m.manifest_length:
                return f"manifest {path} is {size} bytes, the manifest list says {m.manifest_length}"
            if probe and path.endswith(".avro"):
                probe_avro_file(lambda offset, n: io.read_range(path, offset, n), size)
            elif probe and path.endswith(".parquet"):
                probe_parquet_file(lambda offset, n: io.read_range(path, offset, n), size)
        except NotFoundError:
            return f"manifest {path} is missing"
        except CorruptInputError as e:
            return f"manifest {path} cannot be read: {e.message}"
        return None

    problem = next((p for p in ordered_map(one, manifests, workers=workers) if p is not None), None)
    if problem is not None:
        where = f" (listed in {listed_in})" if listed_in else ""
        raise CorruptInputError(f"{problem}{where}", hint="nothing was written; 'icectl validate' lists every problem")
