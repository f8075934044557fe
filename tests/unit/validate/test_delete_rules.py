"""The rules of icectl/validate/delete_rules.py (delete files and deletion vectors).

One case per rule (the case id is the rule id): a copy of a Spark-written table broken in exactly
that way (the shared machinery is in breaking.py), then the module's edge cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.corrupt import current_manifests, edit_entry, edit_manifest, entry_records

from icectl.codec.puffin import read_puffin_footer
from icectl.spec.manifest import ManifestContent
from icectl.validate.delete_rules import live_among
from unit.validate.breaking import (
    Case,
    added_dv,
    check_rule_is_reported,
    entry,
    first_manifest,
    live_dv,
    live_position_file,
    puffin_of_live_dv,
    set_file,
)


def _dup_dv(d: Path) -> str:
    m = first_manifest(d, ManifestContent.DELETES)

    def apply(_schema: dict[str, Any], _meta: dict[str, bytes], records: list[dict[str, Any]]) -> None:
        live = next(r for r in records if r["status"] != 2)
        records.append(dict(live))
    return edit_manifest(d, m.manifest_path, apply)


def _corrupt_dv_crc(d: Path) -> str:
    _manifest, df = puffin_of_live_dv(d)
    puffin = Path(df["file_path"])
    data = bytearray(puffin.read_bytes())
    data[df["content_offset"] + df["content_size_in_bytes"] - 1] ^= 0xFF  # last byte of the CRC
    puffin.write_bytes(bytes(data))
    return df["file_path"]


def _cardinality_property(d: Path) -> str:
    manifest, df = puffin_of_live_dv(d)
    puffin = Path(df["file_path"])
    data = puffin.read_bytes()
    footer = read_puffin_footer(data)
    start = len(data) - footer.footer_size
    blob = next(b for b in footer.blobs if b.offset == df["content_offset"])
    old = f'"cardinality":"{blob.properties["cardinality"]}"'.encode()
    digit = blob.properties["cardinality"][-1]
    new = old[:-2] + (b"9" if digit != "9" else b"8") + b'"'  # same length: offsets and size stay
    tail = data[start:]
    # Java writes a blob's properties after its offset: replace the first match after it.
    after = tail.index(b'"offset":' + str(blob.offset).encode())
    pos = tail.index(old, after)
    puffin.write_bytes(data[:start] + tail[:pos] + new + tail[pos + len(old):])
    return manifest


def _position_file_beside_dv(d: Path) -> str:
    """Turn one live DV into a Parquet position delete file naming the data file of another live DV."""
    dvs = [(m.manifest_path, i, r) for m in current_manifests(d) if m.content == ManifestContent.DELETES
           for i, r in enumerate(entry_records(m.manifest_path)) if live_dv(m, r)]
    (_, _, first), (path, i, _) = dvs[0], dvs[1]
    target = first["data_file"]["referenced_data_file"]

    def edit(rec: dict[str, Any]) -> None:
        rec["data_file"].update(file_format="PARQUET", referenced_data_file=target, content_offset=None,
                                content_size_in_bytes=None)
    return edit_entry(d, path, i, edit)


def _equality_delete(rec: dict[str, Any]) -> None:
    rec["data_file"]["content"] = 2
    rec["data_file"]["equality_ids"] = [999]


def _v3_position_file(rec: dict[str, Any]) -> None:
    rec["data_file"]["file_format"] = "PARQUET"


def _cut_puffin(d: Path) -> str:
    """Cut the last bytes of a live DV's Puffin file: its footer (magic, length) is gone."""
    _manifest, df = puffin_of_live_dv(d)
    puffin = Path(df["file_path"])
    puffin.write_bytes(puffin.read_bytes()[:-8])
    return df["file_path"]


CASES: list[Case] = [
    Case("deletes.no-v3-position-delete-files", "v3_dv", entry(added_dv, _v3_position_file)),
    Case("deletes.dv-blob-matches", "v3_dv", entry(live_dv, set_file("content_offset", lambda v: v + 1))),
    Case("deletes.dv-blob-valid", "v3_dv", _corrupt_dv_crc),
    Case("deletes.dv-cardinality", "v3_dv", _cardinality_property),
    Case("deletes.one-dv-per-data-file", "v3_dv", _dup_dv, implied=frozenset({"manifest-list.counts"})),
    Case("deletes.dv-target-live", "v3_dv", entry(live_dv, set_file("referenced_data_file", "/gone.parquet")),
         implied=frozenset({"deletes.dv-blob-matches"})),
    Case("deletes.position-delete-target-live", "v2_part",
         entry(live_position_file, set_file("referenced_data_file", "/gone.parquet"))),
    Case("deletes.dv-format-version", "v2_part", entry(live_position_file, set_file("file_format", "PUFFIN")),
         implied=frozenset({"deletes.dv-blob-matches"})),
    Case("deletes.dv-replaces-position-deletes", "v3_dv", _position_file_beside_dv,
         implied=frozenset({"deletes.no-v3-position-delete-files"})),
    Case("deletes.equality-ids", "v2_part", entry(live_position_file, _equality_delete)),
    Case("deletes.puffin-readable", "v3_dv", _cut_puffin),
]


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_rule_is_reported(case, spark_tables, tmp_path)


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_live_targets_are_found_in_lists_and_in_arrow_columns_alike(arrow_type: pa.DataType) -> None:
    paths = [f"s3://b/t/data/{i:05d}.parquet" for i in range(1000)]
    targets = {paths[3], paths[998], "s3://b/t/data/gone.parquet", paths[500] + " "}
    column = pa.array(paths, arrow_type)
    chunked = pa.chunked_array([column[:400], column[400:]])
    for kept in ([paths[:500], paths[500:]], [column[:500], column[500:]], [chunked[:600], chunked[600:]],
                 [paths[:10], column[10:0], chunked[10:]]):
        assert live_among(targets, kept) == {paths[3], paths[998]}
    assert live_among(targets, []) == set()
    assert live_among(set(), [column]) == set()
