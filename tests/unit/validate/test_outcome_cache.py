"""validate's per-manifest outcome cache (icectl/validate/outcome_cache.py) never changes a finding.

Every run is compared with ``--no-cache`` as a whole list of finding rows, order included: cold,
warm, ``--deep`` (which reads the files itself), after a manifest is replaced in place with the
same length, after the metadata or the manifest list changes what a manifest's check finds, and on
every broken table of the rule tests (cached pristine first, then broken behind the cache's back).
``ICECTL_CACHE_RACY_SECONDS=0`` and ``ICECTL_CACHE_MIN_MANIFEST_BYTES=0`` let fresh small
manifests be cached; each change waits 0.05 s so its modification time differs.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import copy_table, current_list, current_manifests, edit_manifest_list, edit_metadata

from icectl.codec.avro_native import DECODER_ENV
from icectl.codec.manifest_reader import read_manifest
from icectl.codec.manifest_writer import write_manifest
from icectl.spec.manifest import ManifestContent
from icectl.table import load_table
from icectl.table.manifest_cache import manifest_cache, set_cache_enabled
from icectl.validate import list_reuse, outcome_cache, validate_table
from icectl.validate.outcome_cache import KIND
from unit.validate import test_delete_rules, test_manifest_list_rules, test_manifest_rules
from unit.validate.breaking import Case

KINDS = ["v1_unpart", "v2_part", "v3_dv", "many_snaps"]
Rows = list[dict[str, Any]]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(folder))
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")
    monkeypatch.delenv("ICECTL_CACHE", raising=False)
    # Outcomes are stored by the entry-by-entry checks only (a manifest the column screen of
    # validate.entry_columns passes stores none): these tests are about them.
    monkeypatch.setenv(DECODER_ENV, "fastavro")
    yield folder
    set_cache_enabled(True)


def rows(table: str | Path, *, all_snapshots: bool = False, deep: bool = False, cache: bool = True) -> Rows:
    set_cache_enabled(cache)
    try:
        result = validate_table(load_table(str(table)), all_snapshots=all_snapshots, deep=deep)
    finally:
        set_cache_enabled(True)
    return json.loads(json.dumps([f.to_row() for f in result.findings], default=repr))


def outcome_hits(table: str | Path, **kw: Any) -> tuple[Rows, int]:
    """The findings, and how many outcomes the run took from the cache."""
    c = manifest_cache()
    assert c is not None
    before = c.hits
    got = rows(table, **kw)
    return got, c.hits - before


def outcomes(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*.arrow") if KIND.encode() in p.read_bytes())


@pytest.mark.parametrize("all_snapshots", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_warm_equals_cold_equals_no_cache_and_deep_reads_files(kind: str, all_snapshots: bool, spark_tables: Any,
                                                                 cache: Path) -> None:
    table = spark_tables[kind].location
    uncached = rows(table, all_snapshots=all_snapshots, cache=False)
    cold, _ = outcome_hits(table, all_snapshots=all_snapshots)
    stored = outcomes(cache)
    warm, hits = outcome_hits(table, all_snapshots=all_snapshots)
    assert cold == uncached
    assert warm == uncached
    if kind != "v3_dv" or all_snapshots:  # v3_dv's current snapshot may list only delete manifests
        assert stored > 0 and hits > 0
    deep_uncached = rows(table, all_snapshots=all_snapshots, deep=True, cache=False)
    deep = rows(table, all_snapshots=all_snapshots, deep=True)
    assert deep == deep_uncached
    assert outcomes(cache) == stored  # --deep neither reads nor writes outcomes


def _rewrite(path: str, records: list[Any], *, table: Path, change: int) -> bytes:
    """The manifest at ``path`` re-encoded without compression, each entry's record_count + ``change``."""
    md = load_table(str(table)).metadata
    m = next(x for x in current_manifests(table) if x.manifest_path == path)
    ptype = md.partition_type(m.partition_spec_id)
    spec = md.spec_by_id(m.partition_spec_id)
    assert spec is not None
    entries = [dataclasses.replace(e, data_file=dataclasses.replace(e.data_file,
                                                                    record_count=e.data_file.record_count + change))
               for e in records]
    return write_manifest(entries, schema=md.schema(), spec=spec, partition_type=ptype,
                          format_version=md.format_version, content=m.content, snapshot_id=m.added_snapshot_id,
                          codec="null").data


def test_manifest_replaced_in_place_with_same_length_gives_new_findings(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    md = load_table(str(table)).metadata
    m = next(x for x in current_manifests(table) if x.content == ManifestContent.DATA)
    entries = list(read_manifest(Path(m.manifest_path).read_bytes(), manifest=m,
                                 partition_type=md.partition_type(m.partition_spec_id),
                                 format_version=md.format_version))
    # Record counts of one varint byte each way: the two versions have the same length.
    assert all(1 <= e.data_file.record_count < 64 for e in entries)
    a = _rewrite(m.manifest_path, entries, table=table, change=0)
    b = _rewrite(m.manifest_path, entries, table=table, change=-1)
    assert len(a) == len(b) and a != b

    def replace(data: bytes) -> None:
        time.sleep(0.05)
        with open(m.manifest_path, "r+b") as f:  # same path, same inode
            f.truncate(0)
            f.write(data)

    replace(a)
    first = rows(table, all_snapshots=True)
    again, hits = outcome_hits(table, all_snapshots=True)
    assert again == first == rows(table, all_snapshots=True, cache=False) and hits > 0
    replace(b)
    after = rows(table, all_snapshots=True)
    assert after == rows(table, all_snapshots=True, cache=False)
    assert after != first  # the list's row counts no longer match the entries
    assert any(r["rule"] == "manifest-list.counts" and m.manifest_path in r["message"] for r in after)


def test_a_spec_change_in_the_metadata_is_not_served_from_the_old_outcome(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    before = rows(table, all_snapshots=True)
    assert rows(table, all_snapshots=True) == before
    md = load_table(str(table)).metadata
    m = next(x for x in current_manifests(table) if x.content == ManifestContent.DATA)
    text = next(f for f in md.schema().fields if str(f.field_type) == "string")

    def edit(doc: dict[str, Any]) -> None:
        for spec in doc["partition-specs"]:
            if spec["spec-id"] == m.partition_spec_id:  # the last field becomes a string: its values do not fit
                spec["fields"][-1].update({"transform": "identity", "source-id": text.field_id})
    time.sleep(0.05)
    edit_metadata(table, edit)
    after = rows(table, all_snapshots=True)
    assert after == rows(table, all_snapshots=True, cache=False)

    def manifest_findings(found: Rows) -> list[Rows]:
        return [r for r in found if r["rule"].startswith("manifest.")]
    assert manifest_findings(after) != manifest_findings(before)


def test_a_list_row_sequence_number_change_is_not_served_from_the_old_outcome(spark_tables: Any,
                                                                                tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    before = rows(table)
    assert rows(table) == before
    target = next(x for x in current_manifests(table) if x.content == ManifestContent.DATA).manifest_path

    def edit(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["manifest_path"] == target:  # ADDED entries inherit it: min_sequence_number disagrees
                r["sequence_number"] += 1
                r["min_sequence_number"] += 1
    time.sleep(0.05)
    edit_manifest_list(current_list(table), edit)
    after = rows(table)
    assert after == rows(table, cache=False)
    assert after != before


BROKEN: list[Case] = [*test_manifest_rules.CASES, *test_manifest_list_rules.CASES, *test_delete_rules.CASES]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: f"{c.rule}-{c.kind}")
def test_broken_tables_after_a_cached_pristine_run(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    """Pristine outcomes cached, then the table broken behind the cache's back: warm equals uncached."""
    table = copy_table(spark_tables[case.kind].location, tmp_path / "t")
    kw = {"deep": case.deep, "all_snapshots": case.all_snapshots}
    rows(table, **kw)
    time.sleep(0.05)
    case.breaks(table)
    uncached = rows(table, **kw, cache=False)
    assert rows(table, **kw) == uncached  # cold for what changed, warm for the rest
    assert rows(table, **kw) == uncached  # warm


def _snapshots_oldest_first(table: Path) -> list[Any]:
    md = load_table(str(table)).metadata
    return [s for s in sorted(md.snapshots, key=lambda s: s.sequence_number) if s.manifest_list]


def test_lists_are_rebuilt_only_while_their_earlier_list_is_the_same_version(spark_tables: Any,
                                                                             tmp_path: Path) -> None:
    """A stored list names the earlier list its other rows were: once that list changes, the later
    list is read again, never rebuilt from the changed list's rows."""
    table = copy_table(spark_tables["many_snaps"].location, tmp_path / "t")
    before = rows(table, all_snapshots=True)
    warm, hits = outcome_hits(table, all_snapshots=True)
    assert warm == before == rows(table, all_snapshots=True, cache=False) and hits > 0
    snaps = _snapshots_oldest_first(table)
    assert len(snaps) >= 3
    parent, child = snaps[-2], snaps[-1]

    def edit(records: list[dict[str, Any]]) -> None:
        for r in records:  # the parent's rows claim the child added them: wrong for the child, were they its rows
            r["added_snapshot_id"] = child.snapshot_id
    time.sleep(0.05)
    edit_manifest_list(parent.manifest_list, edit)
    after = rows(table, all_snapshots=True)
    assert after == rows(table, all_snapshots=True, cache=False)
    assert after != before
    assert not any(r["rule"] == "manifest-list.sequence-number" and r["file"] == child.manifest_list for r in after)
    assert rows(table, all_snapshots=True) == after  # and warm again



def test_outcomes_of_other_checking_code_are_never_replayed(spark_tables: Any, cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # The key holds a hash of the checking code's source (context.checker_fingerprint): after an edit
    # of a rule or an upgrade, every stored outcome misses, without anyone bumping a version number.
    table = spark_tables["many_snaps"].location
    first = rows(table, all_snapshots=True)
    stored = outcomes(cache)
    assert stored > 0
    again = rows(table, all_snapshots=True)
    assert outcomes(cache) == stored  # same code: replayed, nothing new stored
    monkeypatch.setattr(outcome_cache, "checker_fingerprint", lambda: "edited-rules")
    monkeypatch.setattr(list_reuse, "checker_fingerprint", lambda: "edited-rules")
    edited = rows(table, all_snapshots=True)
    assert outcomes(cache) == 2 * stored  # every manifest checked again and stored under the new code
    assert first == again == edited
