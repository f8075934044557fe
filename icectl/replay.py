"""Replaying a rows view's JSON document from the last identical run (issue 31, deliver 3).

A warm ``icectl inspect files TABLE --json`` on a table that has not changed prints the very bytes
it printed last time. Rebuilding them costs the interpreter's start, importing typer, pyarrow and
icectl's read layer, reading the cached manifests and rendering JSON (~0.9 s at 100,000 files);
replaying them costs the start, a few hundred ``stat`` calls and one write (~0.05 s). So the
console entry (:mod:`icectl.cli.launch`) asks this module first, before importing anything heavy;
this module imports the standard library only.

What a replay trusts, and why it never changes an answer:

* **The key** is the whole command line (after the program name), the working folder, every
  ``ICECTL_*``, ``AWS_*``, ``TZ``, ``LANG`` and ``LC_*`` variable, the Python, and a stamp of the
  code that renders (each icectl module's size and mtime, and pyarrow's, fastavro's and
  datafusion's package files): a new icectl or a new library misses.
* **The dependencies** are every local path the recorded run read, checked or listed through
  :class:`icectl.storage.FileIO` (metadata JSON, ``version-hint.text``, the folders listed to find
  the current version, manifest lists, manifests) and the config file, each with its inode, size,
  mtime and ctime as the run saw them (a path absent then must still be absent). A replay
  ``stat``-s each one; any difference is a miss. A file changed in the last
  ``ICECTL_CACHE_RACY_SECONDS`` when the run ended is not trusted, as in the manifest cache.
* **Only what can be known that way is recorded**: ``inspect files|entries|manifests|partitions``
  with ``--json`` (or ``--format json``), a table given by path (a catalog's answer is not a
  file), the local engine, the local file system only, exit code 0 and nothing said on stderr.
  Anything else spoils the recording (:func:`spoil`) and the run is simply not stored.
* **An entry is one file**: the document, then a JSON header naming the key, the dependencies,
  the document's length and CRC-32, then the header's length (written after the document, which
  is thus copied once), all written to a temporary name and renamed into place. The whole
  document is read and checked before a byte of it is written, so a damaged entry is a miss,
  never half a document.

The entries live in ``<cache dir>/views/``, at most :data:`MAX_ENTRIES` of them and
:data:`MAX_BYTES` in all (least recently used go first); ``icectl cache clear`` removes them with
the manifests. ``--no-cache`` and ``ICECTL_CACHE=off`` turn replays off with the cache,
``ICECTL_REPLAY=off`` alone (the manifest cache still serves).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
import struct
import sys
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = [
    "FOLDER",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "VIEWS",
    "armed",
    "clear",
    "config_places",
    "default_cache_root",
    "entries",
    "finish",
    "note",
    "offer",
    "replay_or_record",
    "replayable",
    "spoil",
    "spool",
]

FORMAT = 1
VIEWS = frozenset({"files", "entries", "manifests", "partitions"})  # of `icectl inspect`
MAX_ENTRIES = 16
MAX_BYTES = 1 << 30
MAX_BODY = 256 << 20  # a bigger document is not stored (it would be read whole before a replay)
FOLDER = "views"
SUFFIX = ".view"
ENTRY_NAME = re.compile(r"[0-9a-f]{40}\.view")  # the only names this module deletes
TEMP_NAME = re.compile(r"\.tmp-view-\d+-[0-9a-f]{16}")
MAX_HEADER = 64 << 20  # 20,000 manifests' dependencies are ~3 MB of header
MAGIC = b"ICECTLRV"
TRAILER = struct.Struct("<8sQ")  # magic, length of the JSON header before it
OFF_VALUES = {"off", "0", "false", "no", "disabled"}
REPLAY_ENV = "ICECTL_REPLAY"  # "off": render every time (the manifest cache still serves)
_ENV_PREFIXES = ("ICECTL_", "AWS_", "LC_")
_ENV_NAMES = ("TZ", "LANG", "HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
_STAMPED_LIBRARIES = ("pyarrow", "fastavro", "datafusion")


# -- the read log: what the recorded run depended on --------------------------------------------

class _Recording:
    def __init__(self, key: str, path: Path) -> None:
        self.key = key
        self.path = path
        self.lock = threading.Lock()
        self.seen: dict[str, list[Any] | None] = {}  # path -> its stat when first read (None: absent)
        self.spoiled = False
        self.body: Path | None = None  # the rendered document, in a temp file of the views folder
        self.crc32 = self.length = 0


_active: _Recording | None = None


def armed() -> bool:
    """Whether this run is being recorded for a later replay."""
    return _active is not None and not _active.spoiled


def note(local: str | None) -> None:
    """A local path (None: a remote one) was read, checked or listed by this run; called by
    :class:`icectl.storage.FileIO`. A remote path spoils the recording: no ``stat`` can vouch for it."""
    rec = _active
    if rec is None or rec.spoiled:
        return
    if local is None:
        spoil()
        return
    local = os.path.abspath(local)
    if local not in rec.seen:
        stamp = _stat(local)
        with rec.lock:
            rec.seen.setdefault(local, stamp)


def spoil() -> None:
    """This run cannot be replayed (it wrote, read remote storage, asked a catalog, warned ...)."""
    rec = _active
    if rec is not None:
        rec.spoiled = True


def _stat(path: str) -> list[Any] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        spoil()
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


# -- keys and the folder ------------------------------------------------------------------------

def replayable(argv: Sequence[str]) -> bool:
    """Whether a command line is one this module records and replays: ``inspect`` + a view of
    :data:`VIEWS` + JSON output, no global option before ``inspect``, no Spark engine, no help."""
    if len(argv) < 3 or argv[0] != "inspect" or argv[1] not in VIEWS:
        return False
    words = set(argv[2:])
    if words & {"-h", "--help", "--engine", "--spark-master", "--spark-conf"}:
        return False
    return "--json" in words or "--format=json" in words or any(
        a in {"-f", "--format"} and b == "json" for a, b in itertools.pairwise(argv))


def _enabled() -> bool:
    return all(os.environ.get(name, "").strip().lower() not in OFF_VALUES for name in ("ICECTL_CACHE", REPLAY_ENV))


def config_places() -> list[Path]:
    """Where a config file is looked for without ``$ICECTL_CONFIG``, in order (icectl.config's
    lookup uses this list; it lives here so a replay finds it without importing icectl.config,
    25 ms of a 50 ms replay)."""
    return [Path("icectl.toml"), Path.home() / ".config" / "icectl" / "config.toml"]


def default_cache_root() -> Path:
    """The cache folder without ``$ICECTL_CACHE_DIR`` or ``[cache] dir``: ``$XDG_CACHE_HOME/icectl``
    or ``~/.cache/icectl`` (icectl.table.manifest_cache uses this too)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "icectl"


def _config_candidates() -> list[Path]:
    env = os.environ.get("ICECTL_CONFIG")
    return [Path(env)] if env else config_places()


def _config_file() -> Path | None:
    return next((p for p in _config_candidates() if p.is_file()), None)


def folder() -> Path | None:
    """Where the view entries are: ``views/`` in the manifest cache's folder, found as
    :func:`icectl.table.manifest_cache.cache_dir` finds it (None: the config file is unreadable)."""
    env = os.environ.get("ICECTL_CACHE_DIR")
    if env:
        return Path(env).expanduser() / FOLDER
    config = _config_file()
    if config is not None:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10 has no tomllib: its backport (a dependency there)
            import tomli as tomllib
        try:
            with open(config, "rb") as f:
                configured = tomllib.load(f).get("cache", {}).get("dir")
        except (OSError, ValueError, AttributeError):
            return None
        if configured:
            return Path(str(configured)).expanduser() / FOLDER
    return default_cache_root() / FOLDER


def _code_stamp() -> list[Any]:
    import importlib.util

    stamp: list[Any] = [sys.version, sys.executable]
    package = Path(__file__).resolve().parent
    todo = [package]
    while todo:  # ~200 modules: a scandir per folder, ~2 ms
        with os.scandir(todo.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        todo.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    stamp.append([entry.path, st.st_size, st.st_mtime_ns])
    for name in _STAMPED_LIBRARIES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        stamp.append([name, _stat(origin) if origin else None, origin])
    return sorted(stamp, key=str)


def _key(argv: Sequence[str]) -> str:
    import hashlib

    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES)
    material = json.dumps([FORMAT, list(argv), os.getcwd(), env, _code_stamp()], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:40]


# -- replaying ----------------------------------------------------------------------------------

def replay_or_record(argv: Sequence[str], out: IO[bytes]) -> bool:
    """Write the recorded document of this command line to ``out`` if every file it came from is as
    it was (True). Otherwise write nothing, and record this run if it is one that can be replayed
    (False: the caller runs the command)."""
    global _active
    _active = None
    if not replayable(argv) or not _enabled():
        return False
    try:
        where = folder()
        key = _key(argv)
    except (OSError, RuntimeError):  # a working folder gone, no home folder: run without replays
        return False
    if where is None:
        return False
    path = where / (key + SUFFIX)
    body = _checked_body(path, key)
    if body is None:
        _active = _Recording(key, path)
        return False
    out.write(body)
    out.flush()
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    return True


def _checked_body(path: Path, key: str) -> bytes | None:
    try:
        # Not through a link, never blocking on a FIFO: only a regular file can be an entry.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            if not stat.S_ISREG(st.st_mode) or size < TRAILER.size:
                return None
            f.seek(size - TRAILER.size)
            magic, header_length = TRAILER.unpack(f.read(TRAILER.size))
            length = size - TRAILER.size - header_length
            if magic != MAGIC or header_length > MAX_HEADER or length < 0:
                return None
            f.seek(length)
            header = json.loads(f.read(header_length))
            if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key \
                    or header.get("length") != length:
                return None
            for dep in header["deps"]:
                if _stat(dep[0]) != dep[1]:
                    return None
            f.seek(0)
            body = f.read(length)
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return None
    if len(body) != length or zlib.crc32(body) != header["crc32"]:
        return None
    return body


# -- recording ----------------------------------------------------------------------------------

def spool() -> IO[bytes] | None:
    """A file for the rendered document when this run is recorded (a temporary file of the views
    folder, which becomes the entry: the document is written once), else None."""
    rec = _active
    if rec is None or rec.spoiled:
        return None
    try:
        rec.path.parent.mkdir(parents=True, exist_ok=True)
        temp = rec.path.parent / f".tmp-view-{os.getpid()}-{os.urandom(8).hex()}"
        f = open(temp, "x+b")  # closed by offer, or by the renderer's with-block
    except OSError:
        spoil()
        return None
    rec.body = temp
    return f


def offer(document: IO[bytes]) -> None:
    """The document was written to ``document`` (from :func:`spool`) and printed: it is kept
    until :func:`finish`, which stores it if the run ends well."""
    rec = _active
    try:
        document.seek(0)
        crc = size = 0
        while chunk := document.read(1 << 20):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
        document.close()
    except OSError:
        spoil()
        return
    if rec is not None:
        rec.crc32, rec.length = crc, size


def finish(ok: bool, *, racy_ns: int = 2_000_000_000, cache_root: Path | None = None) -> bool:
    """End the recording: store the entry when the run succeeded, said nothing on stderr, and every
    file it depended on (the config file's places among them) is still as first seen and older
    than ``racy_ns``. ``cache_root``: the manifest cache's folder as the run's config names it; an
    entry goes only under it, where ``cache clear`` looks. True when stored."""
    global _active
    rec, _active = _active, None
    if rec is None:
        return False
    temp, rec.body = rec.body, None
    try:
        if temp is None or not ok or rec.spoiled:
            return False
        if cache_root is not None and os.path.abspath(rec.path.parent) != os.path.abspath(cache_root / FOLDER):
            return False
        for config in _config_candidates():  # a config file that appears or changes is a miss
            rec.seen.setdefault(os.path.abspath(config), _stat(str(config)))
        deps = sorted(rec.seen.items())
        now = time.time_ns()
        if rec.length > MAX_BODY or any(_stat(p) != s or (s is not None and now - s[3] < racy_ns) for p, s in deps):
            return False
        header = json.dumps({"format": FORMAT, "key": rec.key, "deps": deps, "length": rec.length,
                             "crc32": rec.crc32}).encode()
        with open(temp, "ab") as f:  # after the body, so the body is never copied a second time
            f.write(header + TRAILER.pack(MAGIC, len(header)))
        os.replace(temp, rec.path)
        temp = None
        _evict(rec.path.parent)
        return True
    except OSError:
        return False
    finally:
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass


# -- the folder ---------------------------------------------------------------------------------

def entries(where: Path | None = None) -> list[tuple[Path, int, int]]:
    """The view entries (path, bytes, last use ns), most recently used first."""
    where = where or folder()
    if where is None:  # never the working folder (os.scandir(None) lists it)
        return []
    found = []
    try:
        with os.scandir(where) as it:
            for e in it:
                if ENTRY_NAME.fullmatch(e.name):
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    found.append((Path(e.path), st.st_size, st.st_mtime_ns))
    except OSError:
        return []
    return sorted(found, key=lambda x: -x[2])


STALE_TEMP_SECONDS = 3600  # a temp file this old belongs to a process that died mid-write


def _evict(where: Path) -> None:
    try:
        with os.scandir(where) as it:
            for e in it:
                if TEMP_NAME.fullmatch(e.name) and \
                        time.time() - e.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS:
                    os.unlink(e.path)
    except OSError:
        pass
    kept = total = 0
    for path, size, _ in entries(where):
        kept, total = kept + 1, total + size
        if kept > MAX_ENTRIES or total > MAX_BYTES:
            try:
                os.unlink(path)
            except OSError:
                pass


def clear(where: Path | None = None, *, dry_run: bool = False) -> tuple[int, int]:
    """Remove every view entry: (entries, bytes) removed or, dry run, to remove."""
    found = entries(where)
    if not dry_run:
        for path, _, _ in found:
            try:
                os.unlink(path)
            except OSError:
                pass
    return len(found), sum(size for _, size, _ in found)
