"""validate's column screen (icectl/validate/entry_columns.py) against the entry loop it replaces.

The screen may only say "clean" where the per-entry rules find nothing, and then must hand over
exactly what the loop gathers (counts, partition statistics, sequence numbers, live files, row-id
ranges). Checked on every manifest of the Spark fixtures and on fixture manifests edited at
random (hypothesis): wherever the screen answers, the loop's findings and summary are the
screen's.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corrupt import copy_table, edit_entry, find_entry
from support.fixtures import FIXTURE_KINDS
from support.relocate import read_raw_avro, write_avro

from icectl.codec.avro_native import DECODER_ENV, native_enabled
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.table import load_table
from icectl.table.scan import manifests_of
from icectl.validate import CATALOGUE, entry_columns, manifest_rules, validate_table
from icectl.validate.context import Context
from icectl.validate.rules import Reporter


@pytest.fixture(autouse=True)
def native_on() -> None:
    # Checked when each test runs: a damaged-file read that hung DataFusion turns it off for the
    # rest of the process (icectl.codec.avro_native), and these tests are the native path's.
    if not native_enabled():
        pytest.skip("native decoding is off in this process")


pytestmark = pytest.mark.skipif(not native_enabled(), reason="the screen runs on the native decoder")

ALL_RULES = frozenset(CATALOGUE)


def _context(table_dir: str | Path) -> Context:
    t = load_table(str(table_dir))
    return Context(t.metadata, t.io, t.metadata_location, Reporter(ALL_RULES))


def _manifests(ctx: Context) -> list[ManifestFile]:
    seen: dict[str, ManifestFile] = {}
    for snap in ctx.metadata.snapshots:
        for m in manifests_of(ctx.metadata, snap, ctx.io):
            seen.setdefault(m.manifest_path, m)
    return list(seen.values())


def _check(ctx: Context, m: ManifestFile, data: bytes, screened: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    """(the summary as plain values, the findings) of checking one manifest."""
    ctx.reporter = Reporter(ALL_RULES)
    summary = manifest_rules.check_manifest(ctx, "list.avro", m, 0, data, screened=screened)
    findings = [dataclasses.asdict(f) for f in ctx.reporter.findings]
    if summary is None:
        return None, findings
    totals = summary.totals
    plain = {k: v for k, v in vars(summary).items() if k not in ("totals", "manifest")}
    live = plain["live_data_files"]  # the screen keeps them as Arrow strings
    plain["live_data_files"] = live if isinstance(live, list) else live.to_pylist()
    plain["totals"] = (dict(totals.files), dict(totals.rows), totals.min_live_sequence_number,
                       [dataclasses.asdict(p) for p in totals.partitions])
    return plain, findings


@pytest.mark.parametrize("kind", FIXTURE_KINDS)
def test_screen_equals_the_entry_loop_on_every_fixture_manifest(kind: str, spark_tables: Any) -> None:
    ctx = _context(spark_tables[kind].location)
    manifests = _manifests(ctx)
    datas = [ctx.io.read(m.manifest_path) for m in manifests]
    screened = entry_columns.screen_manifests(ctx, list(zip(manifests, datas, strict=True)))
    assert any(s is not None for s in screened)  # the screen answers for Spark's data manifests
    for m, data, s in zip(manifests, datas, screened, strict=True):
        if m.content == ManifestContent.DELETES:
            assert s is None  # the delete rules read Puffin files: always entry by entry
            continue
        assert s is not None, m.manifest_path
        assert _check(ctx, m, data, s) == _check(ctx, m, data)


# --------------------------------------------------------------------------- random edits

EDITS = ("record_count", "file_size_in_bytes", "counts", "bound", "swap_bounds", "partition", "status",
         "snapshot_id", "sequence_number", "file_sequence_number", "file_path", "repeat_key", "content",
         "first_row_id", "drop_bound")


def _apply(rec: dict[str, Any], edit: str, value: int, raw: bytes) -> None:
    df = rec["data_file"]
    if edit in ("record_count", "file_size_in_bytes"):
        df[edit] = value
    elif edit == "counts":
        name = ("value_counts", "null_value_counts", "nan_value_counts", "column_sizes")[value % 4]
        if df.get(name):
            df[name][value % len(df[name])]["value"] = value // 4 - 3
    elif edit == "bound":
        name = "lower_bounds" if value % 2 else "upper_bounds"
        if df.get(name):
            df[name][value % len(df[name])]["value"] = raw
    elif edit == "swap_bounds":
        if df.get("lower_bounds") and df.get("upper_bounds"):
            df["lower_bounds"], df["upper_bounds"] = df["upper_bounds"], df["lower_bounds"]
    elif edit == "drop_bound":
        name = "lower_bounds" if value % 2 else "upper_bounds"
        if df.get(name):
            df[name].pop(value % len(df[name]))
    elif edit == "partition":
        part = df.get("partition") or {}
        if part:
            key = sorted(part)[value % len(part)]
            old = part[key]
            part[key] = None if value % 3 == 0 else (old + value if isinstance(old, int) else
                                                      raw.decode("latin-1") if isinstance(old, str) else old)
    elif edit == "status":
        rec["status"] = value % 3
    elif edit in ("snapshot_id", "sequence_number", "file_sequence_number"):
        rec[edit] = None if value % 3 == 0 else value % 7
    elif edit == "file_path":
        df["file_path"] = ("relative/x.parquet", "s3://bucket/x.parquet", df["file_path"] + "#x")[value % 3]
    elif edit == "repeat_key":
        name = ("value_counts", "lower_bounds")[value % 2]
        if df.get(name):
            df[name].append(dict(df[name][0]))
    elif edit == "content":
        df["content"] = value % 3
    elif edit == "first_row_id" and "first_row_id" in df:
        df["first_row_id"] = None if value % 2 else value


edit_lists = st.lists(st.tuples(st.integers(0, 40), st.sampled_from(EDITS), st.integers(-5, 2**41),
                                st.binary(max_size=9)), max_size=4)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=st.sampled_from(("v1_unpart", "v2_part", "v3_dv")), pick=st.integers(0, 50), edits=edit_lists)
def test_where_the_screen_answers_the_entry_loop_finds_the_same(kind: str, pick: int,
                                                                edits: list[tuple[int, str, int, bytes]],
                                                                spark_tables: Any) -> None:
    ctx = _context(spark_tables[kind].location)
    data_manifests = [m for m in _manifests(ctx) if m.content == ManifestContent.DATA]
    m = data_manifests[pick % len(data_manifests)]
    other = data_manifests[(pick + 1) % len(data_manifests)]
    schema, meta, sync, records = read_raw_avro(ctx.io.read(m.manifest_path))
    for at, edit, value, raw in edits:
        if records:
            _apply(records[at % len(records)], edit, value, raw)
    try:
        data = write_avro(schema, meta, sync, records)
    except (ValueError, TypeError, OverflowError):  # an edit the schema cannot hold
        return
    pristine = ctx.io.read(other.manifest_path)
    # the edited manifest between two pristine ones: one batch, one joined read
    screened = entry_columns.screen_manifests(ctx, [(other, pristine), (m, data), (other, pristine)])
    assert screened[0] is not None and screened[2] is not None
    assert _check(ctx, other, pristine, screened[0]) == _check(ctx, other, pristine)
    if screened[1] is not None:
        assert _check(ctx, m, data, screened[1]) == _check(ctx, m, data)
    elif not edits:
        raise AssertionError("an unedited Spark manifest was not screened")


def test_validate_screens_and_reports_as_the_entry_loop(spark_tables: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: a table with broken entries gives the same findings screened and not."""
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    path, i = find_entry(table, lambda m, rec: m.content == ManifestContent.DATA)
    edit_entry(table, path, i, lambda rec: rec["data_file"].update(record_count=-1))
    calls: list[int] = []
    real = entry_columns.screen_manifests
    monkeypatch.setattr(entry_columns, "screen_manifests",
                        lambda ctx, items: calls.append(len(items)) or real(ctx, items))
    monkeypatch.setattr(importlib.import_module("icectl.validate.fetch"), "screen_manifests",
                        entry_columns.screen_manifests)

    def findings() -> list[Any]:
        return [f.to_row() for f in validate_table(load_table(str(table)), all_snapshots=True).findings]

    screened = findings()
    assert calls and any(r["rule"] == "manifest.entry-values" for r in screened)
    monkeypatch.setenv(DECODER_ENV, "fastavro")
    assert findings() == screened
