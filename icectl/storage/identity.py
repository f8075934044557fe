"""The store's identity of one version of a file: what the manifest cache keys its entries on.

Local files: length, mtime, ctime and inode (a rewrite in place changes ctime, a replacement the
inode). A file whose ctime is within the racy window of now may still change without its
timestamps moving (coarse clocks, as git's "racy" index entries), so it is not ``cacheable``.
Object storage: length, ETag and LastModified (a PUT is atomic: no racy window there).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Hidden knob for tests, which write a file and must cache it at once (0) or never (large).
RACY_SECONDS_ENV = "ICECTL_CACHE_RACY_SECONDS"
DEFAULT_RACY_SECONDS = 2.0


@dataclass(frozen=True)
class FileIdentity:
    """One version of a file as its store names it; two versions are equal when length and version
    are (``cacheable`` is advice for the cache, not part of the version)."""

    length: int
    version: str  # local: f"{mtime_ns}:{ctime_ns}:{ino}"; object storage: f"{etag}:{last_modified}"
    cacheable: bool = field(default=True, compare=False)


def racy_window_ns() -> int:
    raw = os.environ.get(RACY_SECONDS_ENV)
    try:
        seconds = float(raw) if raw else DEFAULT_RACY_SECONDS
    except ValueError:
        seconds = DEFAULT_RACY_SECONDS
    return int(max(seconds, 0.0) * 1e9)


def local_identity(st: os.stat_result) -> FileIdentity:
    # A ctime in the future (the clock went back) is racy too: the difference is negative.
    settled = time.time_ns() - st.st_ctime_ns >= racy_window_ns()
    return FileIdentity(st.st_size, f"{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}", cacheable=settled)


def object_identity(info: Mapping[str, Any]) -> FileIdentity | None:
    """From an object's HEAD (s3fs ``info()`` or an open file's ``details``); None without an ETag."""
    etag = str(info.get("ETag") or "").strip()
    if not etag:
        return None
    modified = info.get("LastModified") or ""
    stamp = modified.isoformat() if hasattr(modified, "isoformat") else str(modified)
    return FileIdentity(int(info.get("size") or info.get("Size") or 0), f"{etag}:{stamp}")
