"""Recursive listing of a folder, streamed and parallel (remove-orphan-files reads it)."""

from __future__ import annotations

import os
import queue
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from icectl.errors import IcectlError, NotFoundError, StorageError
from icectl.storage.paths import basename, local_path, scheme_of
from icectl.threads import LIST_WORKERS, streaming_pool

if TYPE_CHECKING:
    from icectl.storage.fileio import FileIO


@dataclass(frozen=True)
class ListedFile:
    """A listed file: path (spelled as the folder listed), mtime in epoch ms (truncated, as Hadoop
    gives it), size, and whether it is a symbolic link (local disks; folder links are not entered)."""

    path: str
    mtime_ms: int
    size: int
    is_link: bool = False


_LIST_BATCH = 512  # files handed from a listing worker to the consumer at a time


def walk_files(io: FileIO, location: str, accept: Callable[[str], bool], *,
               workers: int = LIST_WORKERS) -> Iterator[ListedFile]:
    """Every file under the folder ``location``, streamed; folders listed in parallel (the first
    levels on the caller's thread until there are ``workers`` folders, as Java's driver does).

    ``accept(name)`` is asked for every name below ``location``; a folder it refuses is not
    entered (Hadoop's ``listStatus`` with a path filter). Local disks: ``os.scandir``, a link to
    a folder is never entered, a link to a file is reported with ``is_link``. Object storage: a
    flat listing per folder handed out. A folder that vanishes meanwhile is skipped; any other
    failure raises :class:`StorageError` (a partial listing must not pass for a whole one).
    """
    if scheme_of(location) == "file":
        root = local_path(location).rstrip("/") or "/"
        base = location.rstrip("/")
        if not os.path.isdir(root):
            raise NotFoundError(f"folder not found: {root}", path=root)
        return _parallel(lambda d: _scan(*(d or (root, base)), accept),
                         lambda d: _local_tree(d[0], d[1], accept), workers, location)
    fs, p = io.filesystem(location)
    prefix = location.split("://", 1)[0] + "://"
    p = p.rstrip("/")
    return _parallel(lambda d: _object_top(io, fs, d[0] if d else p, prefix, location, accept, root=not d),
                     lambda d: _object_tree(io, fs, d[0], prefix, location, accept), workers, location)


def _parallel(scan: Callable[[tuple[str, str] | None], tuple[list[ListedFile], list[tuple[str, str]]]],
              tree: Callable[[tuple[str, str]], Iterator[list[ListedFile]]], workers: int,
              location: str) -> Iterator[ListedFile]:
    files, folders = scan(None)  # (None: the root) its files, and its folders as (listing, spelling)
    yield from files
    for _level in range(2):  # up to 3 levels here while there are fewer folders than workers
        if not folders or len(folders) >= workers:
            break
        deeper: list[tuple[str, str]] = []
        for folder in folders:
            files, subs = scan(folder)
            yield from files
            deeper += subs
        folders = deeper
    if not folders:
        return
    out: queue.Queue[list[ListedFile] | BaseException | None] = queue.Queue(maxsize=4 * max(1, workers))
    stop = threading.Event()

    def put(item: list[ListedFile] | BaseException | None) -> None:
        while not stop.is_set():  # a consumer that stopped reading must not block the workers
            try:
                return out.put(item, timeout=0.1)
            except queue.Full:
                continue

    def run(folder: tuple[str, str]) -> None:
        try:
            for batch in tree(folder):
                if stop.is_set():
                    return
                put(batch)
        except BaseException as e:  # handed to the consumer, raised there
            put(e)
        finally:
            put(None)

    # Never joined on exit (icectl.threads): an abandoned listing may be closed by the garbage collector.
    with streaming_pool(min(workers, len(folders)), thread_name_prefix="icectl-list") as pool:
        try:
            for f in folders:
                pool.submit(run, f)
            running = len(folders)
            while running:
                item = out.get()
                if item is None:
                    running -= 1
                elif isinstance(item, BaseException):
                    if isinstance(item, IcectlError):
                        raise item
                    raise StorageError(f"storage error listing {location}: {item}", path=location) from item
                else:
                    yield from item
        finally:
            stop.set()  # before the pool's exit: on Ctrl-C it waits for the listings, which stop at this


def _local_entry(entry: os.DirEntry[str], path: str) -> ListedFile | None:
    """The file an entry names (None: a folder, a vanished or dangling entry, a socket...)."""
    try:
        link = entry.is_symlink()
        st = entry.stat(follow_symlinks=True) if link else entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        if entry.is_symlink():  # a dangling link: a file name in the table all the same
            return ListedFile(path, 0, 0, is_link=True)
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return ListedFile(path, st.st_mtime_ns // 1_000_000, st.st_size, is_link=link)


def _scan(folder: str, base: str, accept: Callable[[str], bool]
          ) -> tuple[list[ListedFile], list[tuple[str, str]]]:
    """One folder: its accepted files, and its accepted sub-folders (real folders only)."""
    files, subs = [], []
    try:
        it = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):  # vanished during the walk
        return [], []
    except OSError as e:
        raise StorageError(f"storage error listing {folder}: {e}", path=folder) from e
    with it:
        for entry in it:
            if not accept(entry.name):
                continue
            path = f"{base}/{entry.name}"
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except FileNotFoundError:  # vanished during the walk
                continue
            if is_dir:
                subs.append((entry.path, path))
            elif (found := _local_entry(entry, path)) is not None:
                files.append(found)
    return files, subs


def _local_tree(folder: str, base: str, accept: Callable[[str], bool]) -> Iterator[list[ListedFile]]:
    todo, batch = [(folder, base)], []
    while todo:
        files, subs = _scan(*todo.pop(), accept)
        batch += files
        todo += subs
        if len(batch) >= _LIST_BATCH or not todo:
            yield batch
            batch = []


def _object_info(info: dict[str, Any], path: str) -> ListedFile:
    modified: Any = info.get("LastModified") or info.get("mtime")  # a datetime (S3), a number or None
    ms = int(modified.timestamp() * 1000) if hasattr(modified, "timestamp") else int(modified or 0)
    return ListedFile(path, ms, int(info.get("size") or info.get("Size") or 0))


def _object_top(io: FileIO, fs: Any, p: str, prefix: str, location: str, accept: Callable[[str], bool],
                *, root: bool) -> tuple[list[ListedFile], list[tuple[str, str]]]:
    with io._errors(location, "listing"):
        try:
            entries = fs.ls(p, detail=True, refresh=True)
        except FileNotFoundError:
            if not root:  # vanished during the walk
                return [], []
            raise NotFoundError(f"folder not found: {location}", path=location) from None
    files: list[ListedFile] = []
    folders: list[tuple[str, str]] = []
    for info in entries:
        name = basename(str(info["name"]))
        if str(info["name"]).rstrip("/") == p or not accept(name):
            continue
        if info.get("type") == "directory":
            folders.append((str(info["name"]).rstrip("/"), ""))
        else:
            files.append(_object_info(info, prefix + str(info["name"])))
    return files, folders


def _object_tree(io: FileIO, fs: Any, folder: str, prefix: str, location: str,
                 accept: Callable[[str], bool]) -> Iterator[list[ListedFile]]:
    with io._errors(location, "listing"):
        found = fs.find(folder, detail=True, withdirs=False)
    base = folder.rsplit("/", 1)[0]
    batch: list[ListedFile] = []
    for name, info in found.items():
        rel = str(name)[len(base):].strip("/")
        if any(not accept(part) for part in rel.split("/")) or info.get("type") == "directory":
            continue
        batch.append(_object_info(info, prefix + str(name)))
        if len(batch) >= _LIST_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
