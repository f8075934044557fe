"""File access for local paths and object storage, through fsspec.

Everything icectl reads or writes goes through a :class:`FileIO`, so spec code never
sees fsspec and every storage failure becomes one of icectl's errors with the path in it.
``paths`` spells locations, ``fileio`` reads and writes, ``listing`` walks folders and
``identity`` names the version of a file (what the manifest cache keys on).
"""

from __future__ import annotations

from icectl.storage.fileio import FileIO, S3Settings, delete_quietly, fsync_path
from icectl.storage.identity import FileIdentity
from icectl.storage.listing import ListedFile, walk_files
from icectl.storage.paths import (
    S3_SCHEMES,
    basename,
    checksum_sidecar,
    file_key,
    is_relative_path,
    is_within,
    join,
    local_path,
    parent,
    path_identity,
    scheme_of,
)

__all__ = [
    "S3_SCHEMES", "FileIO", "FileIdentity", "ListedFile", "S3Settings", "basename", "checksum_sidecar",
    "delete_quietly", "file_key", "fsync_path", "is_relative_path", "is_within", "join", "local_path", "parent",
    "path_identity", "scheme_of", "walk_files",
]
