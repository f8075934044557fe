"""A persistent cache of decoded manifests and manifest lists, as Arrow tables on the local disk.

Manifests are immutable, so a table read once need not be decoded again: the next run finds it
here, keyed by the file's location plus the store's identity of that version of it
(:class:`~icectl.storage.FileIdentity`: length and ETag, or mtime/ctime/inode). A replaced file
has another identity and misses. The cache never changes an answer:

* one file per (kind, location, identity) under ``<dir>/manifests/``, named by a hash of the key;
  a 64-byte header (magic, format, CRC-32 and length of the body) before an uncompressed Arrow IPC
  file (Feather v2) whose schema metadata repeats the key, so a torn, truncated, foreign or
  colliding file is never taken for the entry (it is a miss, and removed);
* written to a temp file in the same folder then ``os.replace``-d: readers see a whole entry or
  none; several processes may write one entry at once (the last one wins, both are equal);
* read whole into memory (not mapped: a file truncated in place would crash a mapping reader);
  a file evicted or replaced under a reader is a miss or the old whole entry, never a torn one;
* put() never raises: a full or read-only disk turns writes off for the rest of the process;
* least-recently-used eviction: a hit touches the file's mtime; a process scans the folder at its
  first write and again after each tenth of the bound it wrote (other processes write too), keeps a
  running total and deletes the oldest entries down to 90% of the bound.

``kind`` is part of the key: a caller changing its Arrow layout names a new kind (``"manifest/2"``)
so old entries are never read as new ones.
"""

from __future__ import annotations

import errno
import os
import re
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from icectl import replay
from icectl.config import DEFAULT_CACHE_MAX_BYTES, CacheConfig, load_config, parse_size
from icectl.errors import IcectlError
from icectl.storage import FileIdentity, file_key

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CacheInfo",
    "FileIdentity",
    "ManifestCache",
    "cache_dir",
    "cache_info",
    "clear_cache",
    "configure_cache",
    "manifest_cache",
    "set_cache_enabled",
]

FORMAT = 1  # of the entry file (header + Arrow IPC); part of every key, so a change never reads old files
MAGIC = b"ICECTLMC"
HEADER = struct.Struct("<8sIIQ")  # magic, format, crc32 of the body, body length
HEADER_SIZE = 64  # padded: room for later fields
ENTRY_SUFFIX = ".arrow"
TEMP_PREFIX = ".tmp-"
# The only names the cache deletes (eviction, clear, stale temp files): its own. A cache folder
# pointed at the wrong place (ICECTL_CACHE_DIR=/data) must never lose a user's .arrow file.
ENTRY_NAME = re.compile(r"[0-9a-f]{40}\.arrow")
TEMP_NAME = re.compile(r"\.tmp-\d+-[0-9a-f]{32}")
STALE_TEMP_SECONDS = 3600  # a temp file this old belongs to a process that died mid-write
EVICT_TO = 0.9  # of the bound, so a full cache does not evict on every write
RESCAN_AFTER = 0.1  # of the bound written by this process: then the folder is scanned again
META_PREFIX = b"icectl.cache."
OFF_VALUES = {"off", "0", "false", "no", "disabled"}


@dataclass(frozen=True)
class CacheInfo:
    dir: str
    entries: int
    bytes: int
    bound: int
    writable: bool
    enabled: bool = True


class ManifestCache:
    """The entries under ``folder`` (``<dir>/manifests``), bounded to ``max_bytes`` in total."""

    def __init__(self, root: str | os.PathLike[str], max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        self.root = Path(root)
        self.folder = self.root / "manifests"
        self.max_bytes = max_bytes
        self.writable = True  # False after a write failed: a full or read-only disk
        self.hits = self.misses = self.puts = 0
        self._lock = threading.Lock()
        self._index: dict[str, tuple[int, int]] | None = None  # name -> (last use ns, bytes), from one scan
        self._total = 0
        self._written = 0  # bytes this process wrote since its last scan of the folder

    # -- keys --------------------------------------------------------------------------------

    @staticmethod
    def _meta(kind: str, location: str, identity: FileIdentity) -> dict[bytes, bytes]:
        return {META_PREFIX + b"format": str(FORMAT).encode(), META_PREFIX + b"kind": kind.encode(),
                META_PREFIX + b"location": file_key(location).encode(),
                META_PREFIX + b"length": str(identity.length).encode(),
                META_PREFIX + b"version": identity.version.encode()}

    def path_of(self, kind: str, location: str, identity: FileIdentity) -> Path:
        key = "\0".join((str(FORMAT), kind, file_key(location), str(identity.length), identity.version))
        import hashlib  # 2 ms of every start otherwise (OpenSSL); only a cached read needs it

        return self.folder / (hashlib.sha256(key.encode()).hexdigest()[:40] + ENTRY_SUFFIX)

    # -- read ----------------------------------------------------------------------------------

    def get(self, kind: str, location: str, identity: FileIdentity) -> pa.Table | None:
        """The table put for exactly this version of the file, or None (never raises)."""
        if not identity.cacheable:
            return None
        path = self.path_of(kind, location, identity)
        try:
            table = self._load(path, self._meta(kind, location, identity))
        except FileNotFoundError:
            table = None
        except Exception:  # broken, truncated, foreign: a miss, and the file goes
            table = None
            _remove(path)
        if table is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            os.utime(path)  # last use, for eviction
        except OSError:
            pass
        return table

    @staticmethod
    def _load(path: Path, expected: dict[bytes, bytes]) -> pa.Table | None:
        import pyarrow as pa

        # Read, not memory-mapped: a file truncated in place under a mapping would crash the reader
        # (SIGBUS); reading an entry costs ~0.2 ms per MB.
        with open(path, "rb") as f:
            data = f.read()
        magic, fmt, crc, length = HEADER.unpack(data[:HEADER.size])
        if magic != MAGIC or fmt != FORMAT or length != len(data) - HEADER_SIZE:
            raise ValueError(f"not a cache entry of format {FORMAT}: {path}")
        body = memoryview(data)[HEADER_SIZE:]
        if zlib.crc32(body) != crc:
            raise ValueError(f"checksum mismatch: {path}")
        table = pa.ipc.open_file(pa.py_buffer(body)).read_all()
        meta = dict(table.schema.metadata or {})
        if any(meta.get(k) != v for k, v in expected.items()):
            raise ValueError(f"a cache entry for another file: {path}")
        own = {k: v for k, v in meta.items() if not k.startswith(META_PREFIX)}
        return table.replace_schema_metadata(own or None)

    # -- write ---------------------------------------------------------------------------------

    def put(self, kind: str, location: str, identity: FileIdentity, table: pa.Table) -> None:
        """Store ``table`` for this version of the file; never raises, never blocks on other writers."""
        if not self.writable or not identity.cacheable:
            return
        try:
            body = _serialize(table.replace_schema_metadata(
                {**(table.schema.metadata or {}), **self._meta(kind, location, identity)}))
        except Exception:  # a table Arrow IPC cannot hold: not cached, nothing else changes
            return
        size = HEADER_SIZE + body.size
        if size > self.max_bytes * (1 - EVICT_TO):
            return  # one entry would evict a good part of the cache
        path = self.path_of(kind, location, identity)
        tmp = self.folder / f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
        header = HEADER.pack(MAGIC, FORMAT, zlib.crc32(memoryview(body)), body.size).ljust(HEADER_SIZE, b"\0")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(header)
                f.write(memoryview(body))
            os.replace(tmp, path)
        except OSError as e:
            _remove(tmp)
            self._disable(e)
            return
        self.puts += 1
        self._account(path.name, size)

    def _disable(self, error: OSError) -> None:
        # ENOSPC, EDQUOT, EROFS, EACCES, EPERM, ENOTDIR (the folder is a file)...: every later write
        # would fail the same way, so the rest of the run only reads.
        # ENOENT: the folder was removed meanwhile (a clear), the next write makes it again.
        if error.errno not in (errno.EINTR, errno.ENOENT):
            self.writable = False

    # -- size bound ------------------------------------------------------------------------------

    def _account(self, name: str, size: int) -> None:
        with self._lock:
            # Rescanned after writing a tenth of the bound: other processes write into the same
            # folder, and a total of this process's own writes alone would let it grow by one
            # bound per process (seen in the concurrent-process test at 2.2x the bound).
            if self._index is None or self._written > self.max_bytes * RESCAN_AFTER:
                self._index = dict(self._scan())
                self._total = sum(s for _, s in self._index.values())
                self._written = 0
            self._written += size
            old = self._index.get(name)
            self._total += size - (old[1] if old else 0)
            self._index[name] = (time.time_ns(), size)
            if self._total > self.max_bytes:
                self._evict(int(self.max_bytes * EVICT_TO))

    def _scan(self) -> Iterator[tuple[str, tuple[int, int]]]:
        """Every entry as (name, (last use, bytes)); stale temp files of dead writers are removed."""
        try:
            it = os.scandir(self.folder)
        except OSError:
            return
        now = time.time_ns()
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if ENTRY_NAME.fullmatch(entry.name):
                    yield entry.name, (st.st_mtime_ns, st.st_size)
                elif TEMP_NAME.fullmatch(entry.name) and now - st.st_mtime_ns > STALE_TEMP_SECONDS * 1e9:
                    _remove(Path(entry.path))

    def _evict(self, target: int) -> None:
        """Delete least-recently-used entries until the total is at most ``target``. An entry another
        process used since the scan (newer mtime) is spared on the first pass."""
        assert self._index is not None
        for second_pass in (False, True):
            for name, (used, size) in sorted(self._index.items(), key=lambda kv: kv[1][0]):
                if self._total <= target:
                    return
                path = self.folder / name
                try:
                    mtime = path.stat().st_mtime_ns
                except OSError:  # gone already (another process evicted or cleared it)
                    mtime = None
                if mtime is not None and mtime > used and not second_pass:
                    self._index[name] = (mtime, size)
                    continue
                if mtime is not None:
                    _remove(path)
                del self._index[name]
                self._total -= size

    # -- info ---------------------------------------------------------------------------------------

    def entries(self) -> list[tuple[Path, int]]:
        """(path, bytes) of every entry on disk now."""
        return [(self.folder / name, size) for name, (_, size) in self._scan()]

    def info(self) -> CacheInfo:
        found = self.entries()
        views = replay.entries(self.root / replay.FOLDER)  # rendered views kept for a replay
        return CacheInfo(dir=str(self.root), entries=len(found) + len(views),
                         bytes=sum(s for _, s in found) + sum(s for _, s, _ in views),
                         bound=self.max_bytes, writable=self.writable and _can_write(self.root))

    def clear(self, *, dry_run: bool = False) -> tuple[int, int]:
        """Remove every entry (temp files are live writers'): (entries, bytes) removed or, dry run, to remove."""
        found = self.entries()
        if not dry_run:
            for path, _ in found:
                _remove(path)
            with self._lock:
                self._index, self._total = None, 0
        views, view_bytes = replay.clear(self.root / replay.FOLDER, dry_run=dry_run)
        return len(found) + views, sum(s for _, s in found) + view_bytes


def _serialize(table: pa.Table) -> pa.Buffer:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _can_write(folder: Path) -> bool:
    """Whether entries could be written under ``folder`` (created on first write if missing)."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    if not probe.is_dir():
        return False
    target = probe / "manifests" if probe == folder and (probe / "manifests").is_dir() else probe
    try:
        fd, name = _temp_in(target)
    except OSError:
        return False
    os.close(fd)
    _remove(Path(name))
    return True


def _temp_in(folder: Path) -> tuple[int, str]:
    name = str(folder / f"{TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}")
    return os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), name


# -- the process's cache ----------------------------------------------------------------------------

_enabled = True
_config: CacheConfig | None = None
_instances: dict[tuple[str, int], ManifestCache] = {}
_instances_lock = threading.Lock()


def set_cache_enabled(enabled: bool) -> None:
    """``--no-cache``: every read of this process decodes the files themselves."""
    global _enabled
    _enabled = enabled


def configure_cache(config: CacheConfig | None) -> None:
    """The ``[cache]`` settings of the config file the command loaded (None: look the file up)."""
    global _config
    _config = config


def _settings() -> CacheConfig:
    global _config
    if _config is None:
        try:
            _config = load_config().cache
        except IcectlError:  # the command reports a broken config file itself
            _config = CacheConfig()
    return _config


def cache_dir() -> Path:
    """``$ICECTL_CACHE_DIR``, else ``[cache] dir``, else ``$XDG_CACHE_HOME/icectl`` or ``~/.cache/icectl``."""
    env = os.environ.get("ICECTL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    configured = _settings().dir
    if configured:
        return Path(configured).expanduser()
    return replay.default_cache_root()


def cache_bound() -> int:
    env = os.environ.get("ICECTL_CACHE_MAX_SIZE")
    if env:
        try:
            return parse_size(env)
        except ValueError:
            pass
    return _settings().max_bytes


def cache_enabled() -> bool:
    return _enabled and os.environ.get("ICECTL_CACHE", "").strip().lower() not in OFF_VALUES


def _instance() -> ManifestCache:
    key = (str(cache_dir()), cache_bound())
    with _instances_lock:
        if key not in _instances:
            _instances[key] = ManifestCache(*key)
        return _instances[key]


def manifest_cache() -> ManifestCache | None:
    """This process's cache, or None when disabled (``--no-cache``, ``ICECTL_CACHE=off``)."""
    return _instance() if cache_enabled() else None


def cache_info() -> CacheInfo:
    info = _instance().info()
    return CacheInfo(**{**info.__dict__, "enabled": cache_enabled()})


def clear_cache(*, dry_run: bool = False) -> tuple[int, int]:
    """Remove every entry of the cache folder: (entries, bytes) removed (dry run: would be)."""
    return _instance().clear(dry_run=dry_run)
