"""icectl's own code as one zip for Spark's executors (``addPyFile``): built once per version of the files.

The zip holds the ``icectl`` package as installed (sources only, no ``__pycache__``); its name is the
hash of what it holds, so a session never sees two different zips under one name (Spark refuses to
add a second file of the same name) and an unchanged install reuses the zip it built before.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import icectl


def _package_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def package_zip(folder: str | None = None) -> str:
    """The path of a zip of the installed icectl package (built under ``folder``, default the temp dir)."""
    root = Path(icectl.__file__).parent
    files = _package_files(root)
    digest = hashlib.sha256()
    for p in files:
        st = p.stat()
        digest.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    where = Path(folder or tempfile.gettempdir()) / f"icectl-{os.getuid() if hasattr(os, 'getuid') else 0}"
    where.mkdir(parents=True, exist_ok=True)
    target = where / f"icectl-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return str(target)
    fd, tmp = tempfile.mkstemp(dir=where, suffix=".zip.tmp")
    os.close(fd)
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:
            z.write(p, Path("icectl") / p.relative_to(root))
    os.replace(tmp, target)  # atomic: a concurrent run sees the old zip or the whole new one
    return str(target)


__all__ = ["package_zip"]
