"""The one place manifests and manifest lists are fetched and decoded.

For each file: the store's identity of its current version (a stat or a HEAD, in this run) ->
the manifest cache (:mod:`icectl.table.manifest_cache`) -> on a miss, the bytes with the identity
of exactly the version read -> decoded to an Arrow table (:mod:`icectl.codec.manifest_arrow`),
in worker processes when a batch is big enough to pay for them -> stored under that identity
(only when the store vouches for it: ``identity.cacheable``) -> entries or the table.

Every read checks the identity against the store, so nothing decided here (above all what stays
reachable when deleting) rests on a stale entry. ``use_cache=False`` reads the files themselves
(``validate --deep``). A manifest the Arrow form cannot give back exactly is decoded with the Avro
reader and not cached.

Cold decoding uses the native decoder (:mod:`icectl.codec.avro_native`), which releases the GIL,
in the caller's threads; fastavro, when the native path is off, in worker processes
(:mod:`icectl.processes`) for a batch big enough to pay for them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icectl.codec.avro_native import native_enabled
from icectl.codec.manifest_arrow import (
    ARROW_LAYOUT_VERSION,
    DECODE_KEY,
    NotArrowRepresentable,
    decode_key,
    entries_from_table,
    manifest_table,
    manifest_table_ipc,
)
from icectl.codec.manifest_list_arrow import list_decode_key, manifest_files_from_table, manifest_list_table
from icectl.codec.manifest_reader import ManifestList, read_manifest, read_manifest_list
from icectl.errors import IcectlError
from icectl.processes import pool_size, worker_pool
from icectl.spec.manifest import ManifestEntry, ManifestFile
from icectl.spec.schema import StructType
from icectl.storage import FileIdentity, FileIO
from icectl.table.manifest_cache import ManifestCache, manifest_cache

if TYPE_CHECKING:
    from concurrent.futures import Future

    import pyarrow as pa

MANIFEST_KIND = f"manifest/{ARROW_LAYOUT_VERSION}"
LIST_KIND = f"manifest-list/{ARROW_LAYOUT_VERSION}"

# Worker processes pay when there is enough to decode: starting them (a forkserver, then a fork
# each, importing pyarrow and fastavro) costs ~0.3 s; fastavro decodes ~3 MB of manifests a second.
POOL_MIN_BATCH_BYTES = 4_000_000  # a batch (one scan) at least this big may use the pool ...
POOL_MIN_FILE_BYTES = 64_000      # ... for its manifests at least this big
# Below this size a manifest's entries come straight from the Avro reader, uncached: for a one-entry
# manifest (~7 KB, most of it the schema) the reader takes 0.14 ms, the Arrow form 0.86 ms cold and
# 0.19 ms warm (fixed costs per file: 24 columns built, a cache entry written and checked), which made
# compacting 2,000 small manifests 3x slower. Tests set the variable to 0 to cache every manifest.
MIN_CACHED_ENV = "ICECTL_CACHE_MIN_MANIFEST_BYTES"
DEFAULT_MIN_CACHED_BYTES = 16_384


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How one batch of manifests is read: through the cache or not, in worker processes or not."""

    use_cache: bool = True
    use_pool: bool = False


DEFAULT_READ = ReadOptions()


def batch_options(manifests: Iterable[ManifestFile], *, use_cache: bool = True) -> ReadOptions:
    """Options for reading these manifests together: the pool only for a big batch on several cores."""
    total = sum(m.manifest_length for m in manifests if m.manifest_length >= POOL_MIN_FILE_BYTES)
    return ReadOptions(use_cache=use_cache, use_pool=total >= POOL_MIN_BATCH_BYTES and pool_size() > 1)


# --------------------------------------------------------------------------- manifest lists


def manifest_list(io: FileIO, location: str, *, format_version: int, use_cache: bool = True) -> ManifestList:
    """A manifest list's entries and Avro metadata, through the cache (errors name the file)."""
    try:
        return _manifest_list(io, location, format_version, use_cache)
    except IcectlError as e:
        raise e.in_file(location) from None


def _manifest_list(io: FileIO, location: str, format_version: int, use_cache: bool) -> ManifestList:
    cache = manifest_cache() if use_cache else None
    expected = list_decode_key()
    if cache is not None:
        identity = io.identity(location)
        if identity is not None:
            table = cache.get(LIST_KIND, location, identity)
            if table is not None and _key_of(table) == expected:
                return manifest_files_from_table(table)
    data, identity = io.read_with_identity(location) if cache is not None else (io.read(location), None)
    try:
        table = manifest_list_table(data, format_version=format_version)
    except NotArrowRepresentable:
        return read_manifest_list(data, format_version=format_version)
    if cache is not None and identity is not None:
        cache.put(LIST_KIND, location, identity, table)
    return manifest_files_from_table(table)


# --------------------------------------------------------------------------- manifests


def manifest_arrow(io: FileIO, manifest: ManifestFile, *, partition_type: StructType, format_version: int,
                   options: ReadOptions = DEFAULT_READ, data: bytes | None = None,
                   other_format: Callable[[bytes], list[ManifestEntry] | None] | None = None,
                   ) -> pa.Table | list[ManifestEntry]:
    """One manifest as its Arrow table (:func:`~icectl.codec.manifest_arrow.manifest_table`), or as
    entries when the Arrow form cannot hold it. ``data``: the bytes, when the caller has them (not
    cached: their identity is unknown). ``other_format``: returns the entries of a file that is not
    an ordinary manifest (a v4 leaf), ``None`` for one that is. Errors name the file."""
    path = manifest.manifest_path
    try:
        return _manifest_arrow(io, manifest, partition_type, format_version, options, data, other_format, None)
    except IcectlError as e:
        raise e.in_file(path) from None


def _manifest_arrow(io: FileIO, manifest: ManifestFile, ptype: StructType, format_version: int,
                    options: ReadOptions, data: bytes | None,
                    other_format: Callable[[bytes], list[ManifestEntry] | None] | None,
                    fields: frozenset[str] | None) -> pa.Table | list[ManifestEntry]:
    path = manifest.manifest_path
    cache = manifest_cache() if options.use_cache and data is None else None
    expected = decode_key(manifest, ptype, format_version)
    identity: FileIdentity | None = None
    if cache is not None:
        table = cached_table(cache, io, path, expected)
        if table is not None:
            return table
    if data is None:
        data, identity = io.read_with_identity(path) if cache is not None else (io.read(path), None)
    if other_format is not None:
        entries = other_format(data)
        if entries is not None:
            return entries
    table = _decode(data, manifest, ptype, format_version, options.use_pool)
    if table is None:  # the Arrow form cannot hold it: the reader's entries, not cached
        return list(read_manifest(data, manifest=manifest, partition_type=ptype, format_version=format_version,
                                  fields=fields))
    if cache is not None and identity is not None:
        cache.put(MANIFEST_KIND, path, identity, table)
    return table


def cached_table(cache: ManifestCache, io: FileIO, path: str, expected: bytes) -> pa.Table | None:
    """The cached table of the manifest at ``path`` as it is now, decoded with ``expected`` as its
    decode key (:func:`~icectl.codec.manifest_arrow.decode_key`); None when there is none."""
    identity = io.identity(path)
    if identity is None:
        return None
    table = cache.get(MANIFEST_KIND, path, identity)
    return table if table is not None and _key_of(table) == expected else None


def manifest_entries(io: FileIO, manifest: ManifestFile, *, partition_type: StructType, format_version: int,
                     fields: Iterable[str] | None = None, options: ReadOptions = DEFAULT_READ,
                     data: bytes | None = None,
                     other_format: Callable[[bytes], list[ManifestEntry] | None] | None = None,
                     ) -> list[ManifestEntry]:
    """Every entry of one manifest, equal to ``list(read_manifest(...))`` with the same ``fields``
    (see :func:`manifest_arrow` for the rest)."""
    wanted = frozenset(fields) if fields is not None else None
    if data is None and other_format is None and manifest.manifest_length < min_cached_bytes():
        path = manifest.manifest_path
        try:
            return list(read_manifest(io.read(path), manifest=manifest, partition_type=partition_type,
                                      format_version=format_version, fields=wanted))
        except IcectlError as e:
            raise e.in_file(path) from None
    try:
        got = _manifest_arrow(io, manifest, partition_type, format_version, options, data, other_format, wanted)
    except IcectlError as e:
        raise e.in_file(manifest.manifest_path) from None
    if isinstance(got, list):  # already projected (the reader's fallback, or another format)
        return got
    return entries_from_table(got, manifest=manifest, partition_type=partition_type, fields=wanted)


def min_cached_bytes() -> int:
    """Manifests shorter than this are read without the Arrow form or the cache."""
    try:
        return max(0, int(os.environ.get(MIN_CACHED_ENV, DEFAULT_MIN_CACHED_BYTES)))
    except ValueError:
        return DEFAULT_MIN_CACHED_BYTES


def _key_of(table: pa.Table) -> bytes | None:
    return (table.schema.metadata or {}).get(DECODE_KEY)


# --------------------------------------------------------------------------- decoding, inline or in workers


def _decode(data: bytes, manifest: ManifestFile, ptype: StructType, format_version: int,
            use_pool: bool) -> pa.Table | None:
    """The manifest's table, or None when the Arrow form cannot hold it. Errors are the reader's."""
    import pyarrow as pa

    # The native decoder releases the GIL: the caller's threads decode in parallel, no process
    # (and no pickled table) needed.
    if use_pool and len(data) >= POOL_MIN_FILE_BYTES and not native_enabled():
        fut = _submit(data, manifest, ptype, format_version)
        if fut is not None:
            try:
                ipc = fut.result()
            except Exception:  # a worker died, or failed unexpectedly: decode here, which decides
                ipc = None
            if ipc is not None:
                return pa.ipc.open_stream(ipc).read_all()
            # The worker could not: decoding here raises the reader's exact error, or falls back.
    try:
        return manifest_table(data, manifest=manifest, partition_type=ptype, format_version=format_version)
    except NotArrowRepresentable:
        return None


def _submit(data: bytes, manifest: ManifestFile, ptype: StructType, format_version: int) -> Future[bytes | None] | None:
    from concurrent.futures.process import BrokenProcessPool

    pool = worker_pool()
    if pool is None:
        return None
    try:
        return pool.submit(manifest_table_ipc, data, manifest, ptype, format_version)
    except (BrokenProcessPool, RuntimeError):
        return None
