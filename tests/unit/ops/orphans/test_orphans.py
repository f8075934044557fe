"""`icectl remove-orphan-files` (icectl/ops/orphans.py) on tables built without Spark.

Histories come from ``support.history`` (its own model of every file written); orphans are
planted by the tests, with their ages set by ``os.utime``. What is expected to go is worked out
from what each test planted, and "nothing else was deleted" from a listing of the table taken
before the run with ``os.walk``, never from icectl's own listing or reachability.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from support.forge import forge_commit, property_change
from support.history import (
    AddDeletes,
    Append,
    CompactManifests,
    Delete,
    HistoryBuilder,
    Rollback,
    SetRef,
    SetStatistics,
    physical,
)
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode, RefusedError, UsageError
from icectl.ops.orphans import file_uri, parse_equal_map, remove_orphan_files
from icectl.spec.snapshots import StatisticsFile
from icectl.table import load_table
from icectl.table.commit import commit
from unit.ops.expire.test_expire_v4 import puffin_history  # noqa: F401 - a fixture

DAY = 86400.0
OLD = time.time() - 10 * DAY  # every file of the history is made this old


def age(path: str | Path, when: float = OLD) -> None:
    ns = round(when * 1000) * 1_000_000  # whole milliseconds, as Hadoop reports them
    os.utime(path, ns=(ns, ns))


def age_all(d: Path, when: float = OLD) -> None:
    for root, _dirs, names in os.walk(d):
        for n in names:
            age(os.path.join(root, n), when)


def on_disk(d: Path) -> set[str]:
    out = set()
    for root, _dirs, names in os.walk(d):
        out |= {os.path.join(root, n) for n in names}
    return out


def plant(path: Path, when: float = OLD, crc: bool = False) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"orphan " + path.name.encode())
    age(path, when)
    if crc:
        sidecar = path.parent / f".{path.name}.crc"
        sidecar.write_bytes(b"crc")
        age(sidecar, when)
    return str(path)


def cli(*args: str, expect: int = 0) -> tuple[dict[str, Any], str]:
    r = CliRunner().invoke(app, ["remove-orphan-files", *args, "--json"])
    assert r.exit_code == expect, (r.stdout, r.stderr)
    return (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr


def paths(doc: dict[str, Any], key: str = "orphan_file_locations") -> set[str]:
    return {physical(p) for p in doc[key]}


@pytest.fixture(params=[2, 3])
def history(tmp_path: Path, request: pytest.FixtureRequest) -> HistoryBuilder:
    """Appends, row-level deletes, a delete, a branch, a manifest compaction then a rollback past
    it, replaced statistics; every file (and its Hadoop checksum) ten days old."""
    b = HistoryBuilder(tmp_path / "t", format_version=request.param, spelling="file:", checksums=True)
    for op in (Append(files=2), Append(), AddDeletes(), Delete(), SetRef(name=0, at=0), Append(branch=1),
               SetRef(name=3, at=1), CompactManifests(deletes=True), Rollback(), SetStatistics(),
               SetStatistics(), SetStatistics(at=1, partition=True)):
        b.apply(op)
    age_all(b.table_dir)
    return b


def plant_every_kind(d: Path) -> tuple[set[str], set[str]]:
    """(orphans older than the cutoff, files that must stay) planted in ``d``."""
    old = {
        plant(d / "data" / "aborted-write-00000.parquet", crc=True),  # a Spark task's file, never committed
        plant(d / "data" / "id_bucket=3" / "aborted-00001.parquet"),  # in a partition folder
        plant(d / "metadata" / "stale-m0.avro"),  # a manifest of a failed commit
        plant(d / "metadata" / "snap-99-1-stale.avro"),  # its manifest list
        plant(d / "metadata" / "v0.metadata.json"),  # an old metadata file not in the log
        plant(d / "stray.txt"),  # at the top of the location
        plant(d / "deep" / "a" / "b" / "c" / "d.bin"),
    }
    kept = {
        plant(d / "data" / "young.parquet", when=time.time()),  # may belong to a commit in flight
        plant(d / "data" / "_temporary" / "0" / "task.parquet"),  # hidden folders are not entered
        plant(d / "data" / ".hidden" / "x.parquet"),
        plant(d / "data" / "_SUCCESS"),
        plant(d / "data" / ".x.parquet"),
        plant(d / "metadata" / ".v9.metadata.json.crc"),
    }
    return old, kept


def test_orphans_of_every_kind_are_found_and_only_they_are_deleted(history: HistoryBuilder) -> None:
    d = history.table_dir
    old, kept = plant_every_kind(d)
    expected = old | history.orphans  # the builder's own orphans: replaced statistics files
    before = on_disk(d)

    doc, _ = cli(str(d), "--dry-run")
    assert paths(doc) == expected
    assert paths(doc, "would_delete") == expected and doc["would_write"] == []
    assert doc["too_young_count"] == 1
    assert on_disk(d) == before

    doc, _ = cli(str(d))
    assert doc["deleted_count"] == len(expected) and doc["failures"] == []
    sidecars = {os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.crc") for p in expected} & before
    assert len(sidecars) >= 2
    assert on_disk(d) == before - expected - sidecars  # each orphan's checksum went with it
    for p in kept | set(history.reachable_from(history.snapshots)):
        assert os.path.exists(p), p
    # Every checksum of a kept file stays; the table still loads and reads.
    t = load_table(str(d))
    assert all(os.path.exists(physical(e.metadata_file)) for e in t.metadata.metadata_log)
    assert (d / "metadata" / "version-hint.text").exists()

    doc, _ = cli(str(d))  # nothing left to do
    assert doc["orphan_file_locations"] == []


def test_cutoff_is_exclusive_and_defaults_to_three_days(history: HistoryBuilder) -> None:
    d = history.table_dir
    now_ms = int(time.time() * 1000)
    at = plant(d / "data" / "at-cutoff.parquet", when=(now_ms - 5 * 86_400_000) / 1000)
    before = plant(d / "data" / "before-cutoff.parquet", when=(now_ms - 5 * 86_400_000 - 1) / 1000)
    two_days = plant(d / "data" / "two-days.parquet", when=time.time() - 2 * DAY)
    got = remove_orphan_files(load_table(str(d)), older_than_ms=now_ms - 5 * 86_400_000, dry_run=True,
                              now_ms=now_ms)
    assert {physical(p) for p in got.orphan_file_locations} - history.orphans == {before}
    assert at not in {physical(p) for p in got.orphan_file_locations}
    got = remove_orphan_files(load_table(str(d)), dry_run=True)  # 3 days
    assert {at, before} <= {physical(p) for p in got.orphan_file_locations}
    assert two_days not in {physical(p) for p in got.orphan_file_locations}


def test_a_cutoff_under_24_hours_is_refused_unless_allowed(history: HistoryBuilder) -> None:
    d = history.table_dir
    young = plant(d / "data" / "six-hours.parquet", when=time.time() - 6 * 3600)
    _, err = cli(str(d), "--older-than", "12h", expect=ExitCode.REFUSED)
    assert "24 hours" in err and "--allow-recent" in err and len(err.strip().splitlines()) == 1
    assert os.path.exists(young)
    doc, _ = cli(str(d), "--older-than", "1h", "--allow-recent")
    assert physical(young) in paths(doc) and not os.path.exists(young)


def test_hidden_partition_fields_are_listed_as_java_does(tmp_path: Path) -> None:
    """A partition field named ``_p`` makes ``_p=1`` folders visible; other ``_`` names stay hidden."""
    d = tmp_path / "t"
    r = CliRunner().invoke(app, ["create", str(d), "--schema", "id long, _p long", "--partition-by", "_p",
                                 "--format-version", "2"])
    assert r.exit_code == 0, r.stderr
    age_all(d)
    visible = plant(d / "data" / "_p=1" / "x.parquet")
    hidden = plant(d / "data" / "_q=1" / "x.parquet")
    doc, _ = cli(str(d), "--dry-run")
    assert paths(doc) == {visible}
    assert os.path.exists(hidden)


def test_symlinks_never_lead_a_delete_out_of_the_table(history: HistoryBuilder, tmp_path: Path) -> None:
    d = history.table_dir
    outside = tmp_path / "outside"
    victim_dir = plant(outside / "dir" / "precious.parquet")
    victim = plant(outside / "precious-file.parquet")
    os.symlink(outside / "dir", d / "data" / "linked-dir")
    os.symlink(victim, d / "data" / "linked-file.parquet")
    # An in-table alias: a data file reached by the table under the name of a link is not an orphan.
    doc, _ = cli(str(d))
    assert physical(str(d / "data" / "linked-file.parquet")) in paths(doc, "kept_links")
    assert os.path.exists(victim) and os.path.exists(victim_dir)
    assert os.path.islink(d / "data" / "linked-file.parquet")
    # --location outside the table is refused before anything is listed.
    _, err = cli(str(d), "--location", str(outside), expect=ExitCode.REFUSED)
    assert "outside the table location" in err
    _, err = cli(str(d), "--location", str(d / "data" / "linked-dir"), expect=ExitCode.REFUSED)
    assert os.path.exists(victim_dir)


def test_a_file_reached_through_an_in_table_link_is_valid(history: HistoryBuilder) -> None:
    """The table names ``data/alias`` (a folder link to ``data/real``): files under ``real`` are live."""
    d = history.table_dir
    real = d / "data" / "real"
    real.mkdir()
    target = plant(real / "live.parquet")
    os.symlink(real, d / "data" / "alias")
    t = load_table(str(d))
    md = t.metadata
    forge_commit(t, lambda base: base.replace(statistics=(
        *base.statistics, StatisticsFile(md.snapshots[0].snapshot_id, str(d / "data" / "alias" / "live.parquet"),
                                         16, 8))))
    got = remove_orphan_files(load_table(str(d)), dry_run=False)
    assert target not in {physical(p) for p in got.orphan_file_locations}
    assert os.path.exists(target)


def test_location_narrows_the_run(history: HistoryBuilder, monkeypatch: pytest.MonkeyPatch) -> None:
    d = history.table_dir
    old, _ = plant_every_kind(d)
    doc, _ = cli(str(d), "--location", str(d / "metadata"), "--dry-run")
    assert paths(doc) == {p for p in old | history.orphans if "/metadata/" in p}
    monkeypatch.chdir(d)  # a relative folder is the same folder
    doc, _ = cli(str(d), "--location", "metadata")
    assert paths(doc) == {p for p in old | history.orphans if "/metadata/" in p}
    assert all(os.path.exists(p) for p in old if "/metadata/" not in p)


def _commit_stats_named(d: Path, path: str) -> None:
    t = load_table(str(d))
    sid = t.metadata.snapshots[0].snapshot_id
    forge_commit(t, lambda base: base.replace(statistics=(*base.statistics, StatisticsFile(sid, path, 16, 8))))


def test_prefix_mismatch_modes(history: HistoryBuilder) -> None:
    d = history.table_dir
    named = plant(d / "metadata" / "stats-elsewhere.puffin")
    _commit_stats_named(d, f"hdfs://namenode:8020{named}")  # the metadata names it on another file system
    other = plant(d / "data" / "plain-orphan.parquet")
    before = on_disk(d)
    _, err = cli(str(d), "--dry-run", expect=ExitCode.REFUSED)
    assert "hdfs" in err and "--prefix-mismatch-mode" in err and "nothing deleted" in err
    _, err = cli(str(d), expect=ExitCode.REFUSED)
    assert on_disk(d) == before
    doc, _ = cli(str(d), "--prefix-mismatch-mode", "ignore")
    assert paths(doc, "kept_prefix_mismatch") == {named} and physical(other) in paths(doc)
    assert os.path.exists(named) and not os.path.exists(other)
    doc, _ = cli(str(d), "--prefix-mismatch-mode", "delete")
    assert paths(doc) == {named} and not os.path.exists(named)
    cli(str(d), "--prefix-mismatch-mode", "bogus", expect=ExitCode.USAGE)


def test_equal_authorities_and_schemes_make_a_spelling_match(history: HistoryBuilder) -> None:
    d = history.table_dir
    named = plant(d / "metadata" / "stats-s3a.puffin")
    _commit_stats_named(d, f"s3a://bucket{named}")
    loc = f"s3://bucket{d}"
    # Listing is local, so compare the URIs Java's way directly: s3a is s3 by default.
    assert file_uri(f"s3a://bucket{named}", {"s3a": "s3"}, {}) == file_uri(f"{loc}/metadata/stats-s3a.puffin",
                                                                           {"s3a": "s3"}, {})
    assert file_uri("s3://b1/x", {}, {"b1": "b2"}).authority == "b2"
    assert parse_equal_map("s3a=s3, gs=gcs", "--equal-schemes") == {"s3a": "s3", "gs": "gcs"}
    with pytest.raises(UsageError):
        parse_equal_map("s3a", "--equal-schemes")
    # On disk the file is listed without a scheme: the metadata's s3 names another file system.
    _, err = cli(str(d), "--dry-run", expect=ExitCode.REFUSED)
    assert "s3" in err


def test_max_deletes_refuses_a_larger_run(history: HistoryBuilder) -> None:
    d = history.table_dir
    old, _ = plant_every_kind(d)
    before = on_disk(d)
    _, err = cli(str(d), "--max-deletes", "2", expect=ExitCode.REFUSED)
    assert "--max-deletes" in err
    assert on_disk(d) == before
    doc, _ = cli(str(d), "--max-deletes", str(len(old | history.orphans)))
    assert doc["deleted_count"] == len(old | history.orphans)


def test_gc_disabled_is_refused(history: HistoryBuilder) -> None:
    d = history.table_dir
    commit(load_table(str(d)), lambda base: property_change({"gc.enabled": "false"}))
    orphan = plant(d / "data" / "x.parquet")
    _, err = cli(str(d), expect=ExitCode.REFUSED)
    assert "gc.enabled" in err and os.path.exists(orphan)


def test_damaged_metadata_deletes_nothing(history: HistoryBuilder) -> None:
    d = history.table_dir
    plant_every_kind(d)
    version = (d / "metadata" / "version-hint.text").read_text().strip()
    current = d / "metadata" / f"v{version}.metadata.json"
    doc = json.loads(current.read_text())
    doc["snapshots"][0]["snapshot-id"] = "not a number"
    current.write_text(json.dumps(doc))
    before = on_disk(d)
    _, err = cli(str(d), expect=ExitCode.CORRUPT)
    assert len(err.strip().splitlines()) == 1
    assert on_disk(d) == before


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_an_unreadable_manifest_is_never_taken_for_empty(history: HistoryBuilder, damage: str) -> None:
    d = history.table_dir
    plant_every_kind(d)
    m = next(p for p, mm in history.manifests.items() if any(True for _ in mm.live()))
    m = physical(m)
    if damage == "truncated":
        Path(m).write_bytes(Path(m).read_bytes()[:40])
        age(m)
    else:
        os.remove(m)
    before = on_disk(d)
    _, err = cli(str(d), expect=ExitCode.CORRUPT if damage == "truncated" else ExitCode.NOT_FOUND)
    assert "no file deleted" in err and len(err.strip().splitlines()) == 1
    assert on_disk(d) == before


def test_a_commit_during_the_listing_keeps_its_files(history: HistoryBuilder,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer commits a file that was old and unreferenced when the valid set was read: it stays."""
    d = history.table_dir
    late = plant(d / "metadata" / "stats-late.puffin")
    real_walk = type(history.table.io).walk_files

    def walk(io: Any, location: str, accept: Any, **kw: Any) -> Any:
        _commit_stats_named(d, late)  # between reading the valid files and deciding
        return real_walk(io, location, accept, **kw)

    monkeypatch.setattr(type(history.table.io), "walk_files", walk)
    got = remove_orphan_files(load_table(str(d)))
    assert late not in {physical(p) for p in got.orphan_file_locations}
    assert os.path.exists(late)


def test_v4_table_keeps_roots_leaves_and_manifest_dv_puffins(puffin_history: dict[str, Any]) -> None:  # noqa: F811
    h = puffin_history
    d: Path = h["d"]
    age_all(d)
    old, kept = plant_every_kind(d)
    before = on_disk(d)
    doc, _ = cli(str(d))
    assert paths(doc) == old
    live = {*h["a"], h["b0"], *h["lists"], h["puffin"], *h["roots"].values(), *h["leaves"]}
    assert live <= on_disk(d)
    assert on_disk(d) == before - old - {str(d / "data" / ".aborted-write-00000.parquet.crc")}
    assert kept <= on_disk(d)


def test_options_checked_before_anything_is_read(history: HistoryBuilder) -> None:
    t = load_table(str(history.table_dir))
    with pytest.raises(UsageError):
        remove_orphan_files(t, max_concurrent_deletes=0)
    with pytest.raises(RefusedError):
        remove_orphan_files(t, older_than_ms=int(time.time() * 1000))
    cli(str(history.table_dir), "--older-than", "yesterday-ish", expect=ExitCode.USAGE)
    assert dataclasses.is_dataclass(remove_orphan_files(t, dry_run=True))


def test_a_write_data_path_outside_the_table_is_never_cleaned(history: HistoryBuilder, tmp_path: Path) -> None:
    """write.data.path may name a folder other tables share: expire may delete the table's own
    files there, but orphan removal (which deletes what the table does NOT reference) stays in the
    table's folder: --location there is refused, and a default run never lists it."""
    d = history.table_dir
    shared = tmp_path / "shared"
    foreign = plant(shared / "other-table" / "data.parquet")
    t = load_table(str(d))
    commit(t, lambda base: property_change({"write.data.path": str(shared)}))
    _, err = cli(str(d), "--location", str(shared), expect=ExitCode.REFUSED)
    assert "outside the table location" in err and os.path.exists(foreign)
    doc, _ = cli(str(d))
    assert all(p.startswith(str(d) + "/") for p in paths(doc)) and os.path.exists(foreign)
