"""expire-snapshots and remove-orphan-files with the Spark engine (issue 17) judged by the local engine.

On every Spark fixture kind, two clones of the same table (same snapshot ids and files): the local
engine works on one, the Spark engine (the session's ``local[2]``) on the other, with the same
policy and the same planted orphans; the results (JSON, the table folder spelled ``<T>``) and the
files left on disk must be the same. The dry run of expire is compared on the same clone. Two
kinds run for real (v1_unpart with ``--executor-deletes``: executors delete the checked list), the
others as dry runs.

Hostile: a symbolic link out of the table (to a file and to a folder) is never deleted nor
followed by the Spark path; a damaged retained manifest gives the same error (exit code) on both
engines and deletes nothing. The orphan join is also checked path by path against the local
Matcher on synthetic object-store paths (equivalences, prefix mismatches).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FIXTURE_KINDS, FixtureTable

import icectl.engine
from icectl.engine import Engine, LocalEngine
from icectl.engine.spark_reach import orphan_candidates
from icectl.errors import IcectlError
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.orphans import (
    EQUAL_SCHEMES_DEFAULT,
    Matcher,
    ValidFiles,
    listed_lookup,
    remove_orphan_files,
    valid_lookup,
)
from icectl.table import load_table
from icectl.table.scan import manifests_of

DAY_MS = 24 * 3600 * 1000
# Planted orphans, relative to the table folder: a data file, a .crc sidecar of an orphan, a
# metadata file, one in a new partition folder, and a hidden one (never listed).
ORPHANS = ("data/orphan-1.parquet", "data/.orphan-1.parquet.crc", "metadata/orphan.avro",
           "data/part=x/orphan-2.parquet", "data/_hidden/orphan-3.parquet")


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _plain(doc: dict[str, Any], t: FixtureTable) -> str:
    """The result as text with the table folder spelled <T> (clones differ only there)."""
    text = json.dumps(doc, sort_keys=True)
    for spelling in (f"file:{t.location}", str(t.location)):
        text = text.replace(spelling, "<T>")
    return text


def _plant(t: FixtureTable, old_ms: int) -> None:
    for rel in ORPHANS:
        p = t.location / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"orphan")
        os.utime(p, ns=(old_ms * 1_000_000, old_ms * 1_000_000))


def _expire(t: FixtureTable, engine: Engine, now: int, *, dry_run: bool) -> dict[str, Any]:
    policy = ExpirePolicy(older_than_ms=now, retain_last=1)
    mark = engine.mark()
    with icectl.engine.using(engine):
        res = expire_snapshots(load_table(str(t.location)), policy, dry_run=dry_run, now_ms=now)
    _ran_on_spark(engine, mark)
    assert res.exit_code == 0, res.to_json()
    return res.to_json()


def _orphans(t: FixtureTable, engine: Engine, now: int, *, dry_run: bool = False) -> dict[str, Any]:
    mark = engine.mark()
    with icectl.engine.using(engine):
        res = remove_orphan_files(load_table(str(t.location)), older_than_ms=now - DAY_MS, now_ms=now,
                                  dry_run=dry_run, prefix_mismatch_mode="ignore")
    _ran_on_spark(engine, mark)
    return res.to_json()


def _ran_on_spark(engine: Engine, mark: Any) -> None:
    """The Spark engine really ran Spark jobs (no silent fallback to the local computation)."""
    if engine.name == "spark":
        assert (engine.report_since(mark).spark_jobs or 0) > 0


# Real runs (deletes) on two kinds, dry runs on the others: a Spark run costs seconds of Spark jobs
# (~0.3-0.5 s each on local[2]) and CI's budget is tight; the dry runs compare the same plans.
REAL_RUNS = ("v1_unpart", "v3_dv")


@pytest.mark.parametrize("kind", [k for k in FIXTURE_KINDS if k not in REAL_RUNS])
def test_spark_engine_plans_expiry_and_orphans_as_local(
        kind: str, spark_clone: Callable[..., FixtureTable], spark_engine: Any) -> None:
    t = spark_clone(kind)
    now = int(time.time() * 1000)
    dry = _expire(t, LocalEngine(), now, dry_run=True)
    assert dry["expired_snapshots"], "the policy must expire something"
    assert _expire(t, spark_engine, now, dry_run=True) == dry
    _plant(t, now - 2 * DAY_MS)
    mine = _orphans(t, LocalEngine(), now, dry_run=True)
    assert len(mine["orphan_file_locations"]) == 3  # the hidden one is never listed
    assert _orphans(t, spark_engine, now, dry_run=True) == mine


@pytest.mark.parametrize("kind", REAL_RUNS)
def test_spark_engine_expires_and_removes_orphans_as_local(
        kind: str, spark_clone: Callable[..., FixtureTable], spark_engine: Any, tmp_path: Path) -> None:
    here, there = spark_clone(kind), spark_clone(kind)
    engine = spark_engine
    if kind == "v1_unpart":  # executors delete the checked list
        engine = type(spark_engine)(spark_engine.spark, executor_deletes=True)
    if kind == "v1_unpart":  # links out of the table
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "victim.parquet").write_bytes(b"not the table's")
        os.utime(outside / "victim.parquet", ns=(1, 1))
        for t in (here, there):
            (t.location / "data" / "link.parquet").symlink_to(outside / "victim.parquet")
            (t.location / "data" / "folder-link").symlink_to(outside)
            for link in ("link.parquet", "folder-link"):  # old enough to be judged
                os.utime(t.location / "data" / link, ns=(1, 1), follow_symlinks=False)
    now = int(time.time() * 1000)
    # expire: the dry run on one clone, then the real runs, one engine on each clone
    dry = _expire(there, LocalEngine(), now, dry_run=True)
    assert _expire(there, engine, now, dry_run=True) == dry
    assert dry["expired_snapshots"], "the policy must expire something"
    done = _expire(here, LocalEngine(), now, dry_run=False)
    assert _plain(_expire(there, engine, now, dry_run=False), there) == _plain(done, here)
    assert {k: v for k, v in done.items() if k.startswith("deleted_")} == \
        {f"deleted_{c}_count": len(v) for c, v in dry["would_delete"].items()}
    assert _tree(here.location) == _tree(there.location)
    # remove-orphan-files on the expired clones, with the same orphans planted in both
    for t in (here, there):
        _plant(t, now - 2 * DAY_MS)
    mine = _orphans(here, LocalEngine(), now)
    theirs = _orphans(there, engine, now)
    assert _plain(theirs, there) == _plain(mine, here)
    assert mine["deleted_count"] == len(mine["orphan_file_locations"]) == 3  # the hidden one is never listed
    assert _tree(here.location) == _tree(there.location)
    assert not any("orphan" in p for p in _tree(there.location) if "_hidden" not in p)
    if kind == "v1_unpart":
        assert (tmp_path / "outside" / "victim.parquet").read_bytes() == b"not the table's"
        assert (there.location / "data" / "link.parquet").is_symlink()
        assert theirs["kept_links"] == [f"file:{there.location}/data/link.parquet"] or \
            theirs["kept_links"] == [f"{there.location}/data/link.parquet"]


def test_damaged_manifest_same_error_nothing_deleted(spark_clone: Callable[..., FixtureTable],
                                                     spark_engine: Any) -> None:
    here, there = spark_clone("v2_part"), spark_clone("v2_part")
    now = int(time.time() * 1000)
    table = load_table(str(here.location))
    md = table.metadata
    current = md.snapshot_by_id(md.current_snapshot_id or 0)
    assert current is not None
    damaged = manifests_of(md, current, table.io)[0].manifest_path
    rel = damaged.split(str(here.location), 1)[1].lstrip("/")
    for t in (here, there):
        (t.location / rel).write_bytes(b"Obj\x01 not a manifest")
        _plant(t, now - 2 * DAY_MS)
    before = _tree(there.location)
    codes = {}
    for name, engine, t in (("local", LocalEngine(), here), ("spark", spark_engine, there)):
        with icectl.engine.using(engine):
            with pytest.raises(IcectlError) as dry:
                expire_snapshots(load_table(str(t.location)), ExpirePolicy(older_than_ms=now, retain_last=1),
                                 dry_run=True, now_ms=now)
            with pytest.raises(IcectlError) as orphans:
                remove_orphan_files(load_table(str(t.location)), older_than_ms=now - DAY_MS, now_ms=now)
        codes[name] = (dry.value.exit_code, orphans.value.exit_code, rel in dry.value.one_line())
    assert codes["spark"] == codes["local"]
    assert codes["local"][0] == codes["local"][1] == 4  # corrupt input
    assert _tree(there.location) == before


def test_spark_join_leaves_the_matcher_its_verdicts(spark_engine: Any, tmp_path: Path) -> None:
    """Scheme and authority equivalences, prefix mismatches, scheme-less metadata, sidecars and an
    in-table link alias: the verdicts after the Spark join (plainly valid, or judged by the driver's
    matcher on the valid files the join returned) are the local matcher's, file by file."""
    (tmp_path / "t" / "data").mkdir(parents=True)
    real = tmp_path / "t" / "data" / "real.parquet"
    real.write_bytes(b"x")
    (tmp_path / "t" / "data" / "alias.parquet").symlink_to(real)
    valid = ["s3a://bucket/t/data/a.parquet", "s3://other/t/data/b.parquet", "s3://bucket/t/data/c.parquet",
             f"file:{real}", str(tmp_path / "t" / "data" / "bare.parquet"), "s3://bucket/t/metadata/v1.json",
             "s3://third/t/data/e.parquet"]
    here = f"file:{tmp_path}/t/data"
    listed = ["s3://bucket/t/data/a.parquet", "s3://bucket/t/data/b.parquet", "s3://BUCKET/t/data/c.parquet",
              "s3://bucket/t/data/.c.parquet.crc", "s3://bucket/t/data/.d.parquet.crc", "s3://bucket/t/data/d.parquet",
              "gs://bucket/t/data/a.parquet", "s3://bucket/t/data/e.parquet", f"{here}/alias.parquet",
              f"{here}/bare.parquet", f"{here}/other.parquet", "s3://bucket/t/metadata/v1.json"]
    equal = ({**EQUAL_SCHEMES_DEFAULT}, {"other": "bucket"})
    full = Matcher(*equal)
    full.index(ValidFiles(dict.fromkeys(valid, "x")))
    frame = spark_engine.frame([(p,) for p in valid], "path string")
    todo, related = orphan_candidates(spark_engine, frame, [(p, 0, False) for p in listed],
                                      valid_lookup=valid_lookup, listed_lookup=listed_lookup, shared=Matcher(*equal))
    reduced = Matcher(*equal)
    reduced.index(ValidFiles(dict.fromkeys(related, "x")))
    left = {p for p, _m, _l in todo}
    for path in listed:
        got = reduced.judge(path) if path in left else ("valid", None)
        assert got == full.judge(path), path
    assert left and len(left) < len(listed)  # the join decided some, the driver the others
