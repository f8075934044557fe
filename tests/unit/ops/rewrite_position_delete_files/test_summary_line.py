"""The one line `--all` prints per table for rewrite-position-delete-files."""

from __future__ import annotations

from icectl.cli.output.summaries import convert_equality_deletes_line, rewrite_position_delete_files_line
from icectl.ops.rewrite_position_delete_files.result import (
    ConvertedFileDoc,
    ConvertEqualityDeletesResult,
    DeleteGroupDoc,
    RewritePositionDeleteFilesResult,
)


def _result(**kw: object) -> RewritePositionDeleteFilesResult:
    base: dict[str, object] = dict(
        title="t", table="db.t", branch="main", dry_run=False, format_version=2, starting_snapshot_id=1,
        target_file_size_bytes=64 << 20, delete_granularity="file", rewritten_delete_files_count=0,
        added_delete_files_count=0, rewritten_bytes_count=0)
    base.update(kw)
    return RewritePositionDeleteFilesResult(**base)  # type: ignore[arg-type]


def test_nothing_to_do_says_why() -> None:
    line = rewrite_position_delete_files_line(_result(reason="a format v1 table has no delete files"))
    assert line == "db.t  nothing to rewrite on main (a format v1 table has no delete files)"


def test_a_rewrite_names_files_bytes_groups_and_dangling_deletes() -> None:
    group = DeleteGroupDoc(index=1, partition={}, spec_id=0, files_in=40, bytes_in=2048, records_in=90,
                           data_sequence_number=7, dangling_deletes=7, files_out=12, records_out=83)
    line = rewrite_position_delete_files_line(_result(
        rewritten_delete_files_count=40, added_delete_files_count=12, rewritten_bytes_count=2048,
        dangling_deletes_count=7, groups=[group], dry_run=True))
    assert line.startswith("db.t  would rewrite 40 position delete files (")
    assert line.endswith("into 12 in 1 group, 7 dangling deletes dropped")


def _converted(**kw: object) -> ConvertEqualityDeletesResult:
    base: dict[str, object] = dict(
        title="t", table="db.t", branch="main", dry_run=False, format_version=2, starting_snapshot_id=1,
        converted_equality_delete_files_count=0, converted_equality_delete_bytes=0, data_files_count=0,
        deleted_rows_count=0, added_delete_files_count=0, removed_delete_files_count=0)
    base.update(kw)
    return ConvertEqualityDeletesResult(**base)  # type: ignore[arg-type]


def test_a_conversion_names_the_files_the_rows_and_the_data_files_hit() -> None:
    files = [ConvertedFileDoc(data_file=f"f{i}", equality_delete_files=1, deleted_rows=1, data_sequence_number=4)
             for i in range(2)]
    line = convert_equality_deletes_line(_converted(
        converted_equality_delete_files_count=3, converted_equality_delete_bytes=4096, data_files_count=40,
        deleted_rows_count=57, added_delete_files_count=2, files=files, format_version=3))
    assert line == ("db.t  converted 3 equality delete files (4 KiB) into 2 deletion vectors: "
                    "57 rows in 2 of 40 data files")
    assert convert_equality_deletes_line(_converted(reason="it has no equality delete files")) == \
        "db.t  no equality deletes on main (it has no equality delete files)"
