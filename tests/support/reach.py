"""What a table's metadata reaches, read with json and fastavro only (never through icectl).

The judge of the tests on tables that share files (tests/interop/test_shared_tables_vs_spark.py,
tests/property/test_shared_tables_property.py): every snapshot's manifest list, every manifest it
lists, every file any entry of those manifests names (DELETED entries too: a conservative reach),
statistics files, the metadata file itself and its log. Paths come back as real local paths; a
relative path (invalid before v4) is taken both against the table location and against the
working directory, so neither reading of it may be deleted.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import fastavro


def physical(path: str) -> str:
    """The real local path of ``path`` (``file:`` spellings removed, links resolved)."""
    p = path
    if p.startswith("file://"):
        p = p[len("file://"):]
    elif p.startswith("file:"):
        p = p[len("file:"):]
    return os.path.realpath(p)


def _spellings(path: str, location: str) -> set[str]:
    if path.startswith(("/", "file:")):
        return {physical(path)}
    return {physical(os.path.join(physical(location), path)), physical(path)}


def read_metadata(path: str) -> dict[str, Any]:
    data = Path(physical(path)).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def _avro(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


def reach(metadata_path: str) -> set[str]:
    """Every file the metadata at ``metadata_path`` reaches (see the module doc)."""
    md = read_metadata(metadata_path)
    location = md.get("location") or str(Path(physical(metadata_path)).parent.parent)
    out = {physical(metadata_path)}
    out |= {physical(e["metadata-file"]) for e in md.get("metadata-log", [])}
    for key in ("statistics", "partition-statistics"):
        out |= {physical(s["statistics-path"]) for s in md.get(key, [])}
    for snap in md.get("snapshots", []):
        manifests: list[str] = []
        if snap.get("manifest-list"):
            ml = physical(snap["manifest-list"])
            out.add(ml)
            if os.path.exists(ml):
                manifests = [m["manifest_path"] for m in _avro(ml)]
        manifests += snap.get("manifests", [])
        for m in manifests:
            mp = physical(m)
            out.add(mp)
            if os.path.exists(mp):
                for e in _avro(mp):
                    out |= _spellings(e["data_file"]["file_path"], location)
    return out


def table_reach(table_dir: str | os.PathLike[str]) -> set[str]:
    """What the current version of the file-system table in ``table_dir`` reaches, with its hint."""
    meta = Path(table_dir) / "metadata"
    hint = meta / "version-hint.text"
    version = int(hint.read_text().strip()) if hint.exists() else max(
        int(p.name[1:].split(".")[0]) for p in meta.glob("v*.metadata.json"))
    current = meta / f"v{version}.metadata.json"
    return reach(str(current)) | ({physical(str(hint))} if hint.exists() else set())


def files_under(root: str | os.PathLike[str]) -> set[str]:
    """Every file under ``root`` (real paths), hidden ones too."""
    out: set[str] = set()
    for folder, _dirs, names in os.walk(root):
        out |= {physical(os.path.join(folder, n)) for n in names}
    return out
