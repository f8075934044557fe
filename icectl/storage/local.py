"""Local files straight through ``os``: the part of fsspec's LocalFileSystem that FileIO uses.

``import fsspec`` costs 25-30 ms, a quarter of the start-up budget of a command on a local table
(issue 15), so local paths never load it; other schemes still go through fsspec.
"""

from __future__ import annotations

import os
from typing import IO


class LocalFiles:
    """``cat_file``, ``open``, ``exists``, ``isdir``, ``size``, ``ls``, ``pipe_file``, ``makedirs`` and
    ``rm_file`` as fsspec's local file system answers them (paths already native: :func:`native`)."""

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        with open(path, "rb") as f:
            if start:
                f.seek(start)
            return f.read() if end is None else f.read(max(0, end - (start or 0)))

    def open(self, path: str, mode: str = "rb") -> IO[bytes]:
        return open(path, mode)  # the caller's context manager closes it

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def size(self, path: str) -> int:
        os.lstat(path)  # FileNotFoundError when there is nothing at all
        try:
            return os.stat(path).st_size
        except OSError:  # a dangling link: fsspec says 0
            return 0

    def ls(self, path: str, detail: bool = False) -> list[str]:
        if not os.path.isdir(path):
            os.lstat(path)  # FileNotFoundError when missing; a file lists as itself
            return [path]
        with os.scandir(path) as it:
            return [e.path for e in it]

    def pipe_file(self, path: str, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def rm_file(self, path: str) -> None:
        os.remove(path)


LOCAL_FILES = LocalFiles()


def native(path: str) -> str:
    """A local path as the OS takes it (``~`` expanded, as fsspec does)."""
    return os.path.expanduser(path) if path.startswith("~") else path
