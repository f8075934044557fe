"""The manifest cache never changes an answer.

Every read path (inspect files/entries/manifests/partitions/dvs, validate, the dry runs of compact,
expire, remove-orphan-files and upgrade) prints the same with the cache off, cold, warm, and after a
cached manifest is replaced behind icectl's back at the same path (with another length; with the
same length and other content). And a deleting command never takes a stale entry for what stays
reachable: a manifest replaced so that it references a file makes that file live, and neither
expire-snapshots nor remove-orphan-files deletes it.

``ICECTL_CACHE_RACY_SECONDS=0`` lets files written a moment ago be cached (by default a file
changed within the last 2 s is not, as its version could still change unseen); each replacement
waits 0.05 s so its modification time differs from the cached version's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.manifest_reader import read_manifest
from icectl.codec.manifest_writer import write_manifest
from icectl.spec.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.table import load_table
from icectl.table.manifest_read import manifest_entries
from icectl.table.scan import manifests_of
from unit.ops.lifecycle.test_upgrade import parquet

READ_PATHS: list[tuple[str, ...]] = [
    ("inspect", "files"), ("inspect", "files", "--metrics"), ("inspect", "entries"),
    ("inspect", "entries", "--metrics"), ("inspect", "manifests"), ("inspect", "partitions"), ("inspect", "dvs"),
    ("validate",), ("validate", "--all-snapshots"), ("compact", "--dry-run"),
    ("expire-snapshots", "--retain-last", "1", "--older-than", "0s", "--dry-run"),
    ("remove-orphan-files", "--dry-run", "--older-than", "0s", "--allow-recent"),
    ("upgrade", "--to", "3", "--dry-run"),
]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout + r.stderr


def normalised(text: str) -> str:
    """What differs between two runs of a dry run whatever the cache does: new file names, new
    snapshot ids, 'now'."""
    text = _UUID.sub("<uuid>", text)
    text = re.sub(r"snap-\d+-", "snap-<id>-", text)
    # expire's cutoff and ref ages are computed from the clock of each run
    text = re.sub(r'"expire_older_than": "[^"]*"', '"expire_older_than": <now>', text)
    return re.sub(r'"(older_than_ms|expire_older_than_ms|now_ms|snapshot_age_ms)": \d+', r'"\1": <now>', text)


def every_read(table: str) -> dict[str, tuple[int, str]]:
    return {" ".join(args): (lambda r: (r[0], normalised(r[1])))(cli(*args, table, "--json")) for args in READ_PATHS}


def cache_entries(folder: Path) -> int:
    return sum(1 for _ in folder.rglob("*.arrow"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(folder))
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")  # small ones too
    monkeypatch.delenv("ICECTL_CACHE", raising=False)
    return folder


def make_table(tmp_path: Path, days: tuple[int, ...] = (1, 2, 3)) -> tuple[Path, list[str]]:
    """A v2 table partitioned by day with one data file (inside the table) per append."""
    d = tmp_path / "t"
    code, out = cli("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
                    "--format-version", "2", "--json")
    assert code == 0, out
    (d / "data").mkdir()
    files = []
    for day in days:
        files.append(parquet(d / "data" / f"f{day}.parquet", range(day * 10, day * 10 + 5), day))
        code, out = cli("add-files", str(d), files[-1], "--json")
        assert code == 0, out
    return d, files


def replace_manifest(table_dir: Path, m: ManifestFile, change: Callable[[list[ManifestEntry]], list[ManifestEntry]],
                     codec: str = "deflate") -> bytes:
    """Rewrite manifest ``m`` in place (same path, same inode) with ``change`` applied to its entries."""
    table = load_table(str(table_dir))
    md = table.metadata
    ptype = md.partition_type(m.partition_spec_id)
    data = Path(m.manifest_path).read_bytes()
    entries = list(read_manifest(data, manifest=m, partition_type=ptype, format_version=md.format_version))
    spec = md.spec_by_id(m.partition_spec_id)
    assert spec is not None
    new = write_manifest(change(entries), schema=md.schema(), spec=spec, partition_type=ptype,
                         format_version=md.format_version, content=m.content, snapshot_id=m.added_snapshot_id,
                         codec=codec).data
    time.sleep(0.05)  # a modification time the cached version does not have
    with open(m.manifest_path, "r+b") as f:
        f.truncate(0)
        f.write(new)
    return new


def bigger_file(entries: list[ManifestEntry]) -> list[ManifestEntry]:
    return [dataclasses.replace(e, data_file=dataclasses.replace(
        e.data_file, file_size_in_bytes=e.data_file.file_size_in_bytes + 1)) for e in entries]


def current_manifests(table_dir: Path) -> list[ManifestFile]:
    table = load_table(str(table_dir))
    snap = table.metadata.current_snapshot()
    assert snap is not None
    return manifests_of(table.metadata, snap, table.io, use_cache=False)


def uncached(table: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[int, str]]:
    with monkeypatch.context() as m:
        m.setenv("ICECTL_CACHE", "off")
        return every_read(table)


def test_every_read_path_answers_the_same_cold_warm_and_after_a_replacement(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d, _files = make_table(tmp_path)
    shutil.rmtree(cache)  # what add-files cached
    table = str(d)
    truth = uncached(table, monkeypatch)
    assert all(code in (0, 7) for code, _ in truth.values()), truth
    assert cache_entries(cache) == 0
    assert every_read(table) == truth  # cold
    assert cache_entries(cache) >= 4  # the list and the three manifests went in
    assert every_read(table) == truth  # warm

    m = current_manifests(d)[0]
    old = Path(m.manifest_path).read_bytes()
    # Same path, another length: uncompressed instead of deflate, and a file 1 byte bigger.
    first = replace_manifest(d, m, bigger_file, codec="null")
    assert len(first) != len(old)
    truth = uncached(table, monkeypatch)
    assert every_read(table) == truth
    assert every_read(table) == truth  # and once more, now from the re-cached entry
    assert '"file_size_in_bytes": 819' in truth["inspect files"][1]

    # Same path, same length, other content (file size 819 -> 820: same varint length).
    second = replace_manifest(d, m, bigger_file, codec="null")
    assert len(second) == len(first) and second != first
    truth2 = uncached(table, monkeypatch)
    assert truth2 != truth
    assert every_read(table) == truth2


def test_a_cached_manifest_is_never_read_for_another_inheritance(
        tmp_path: Path, cache: Path) -> None:
    # The same file listed with another sequence number (a retried commit reuses its manifests)
    # is decoded again, not taken from the entry made for the first listing.
    d, _ = make_table(tmp_path, days=(1,))
    table = load_table(str(d))
    m = current_manifests(d)[0]
    ptype = table.metadata.partition_type(m.partition_spec_id)
    first = manifest_entries(table.io, m, partition_type=ptype, format_version=2)
    other = dataclasses.replace(m, sequence_number=m.sequence_number + 5, added_snapshot_id=42)
    again = manifest_entries(table.io, other, partition_type=ptype, format_version=2)
    assert [e.sequence_number for e in first] == [m.sequence_number]
    assert [e.sequence_number for e in again] == [m.sequence_number + 5]
    assert [e.snapshot_id for e in again] == [e.snapshot_id for e in first]  # written, not inherited


def _with_entry_for(path: str) -> Callable[[list[ManifestEntry]], list[ManifestEntry]]:
    def change(entries: list[ManifestEntry]) -> list[ManifestEntry]:
        e = entries[0]
        return [*entries, dataclasses.replace(e, status=ManifestEntryStatus.EXISTING, data_file=dataclasses.replace(
            e.data_file, file_path=path, file_size_in_bytes=os.path.getsize(path)))]
    return change


def test_remove_orphan_files_never_deletes_a_file_a_replaced_manifest_references(
        tmp_path: Path, cache: Path) -> None:
    d, files = make_table(tmp_path)
    extra = parquet(d / "data" / "x.parquet", range(5), 4)
    old = time.time() - 10 * 86400
    for p in (*files, extra):
        os.utime(p, (old, old))
    code, out = cli("remove-orphan-files", str(d), "--older-than", "1d", "--dry-run", "--json")
    assert code == 0, out
    assert extra in json.loads(out)["orphan_file_locations"]  # an orphan now; the cache is warm
    assert cache_entries(cache) >= 4

    replace_manifest(d, current_manifests(d)[-1], _with_entry_for(extra))  # now it is live
    code, out = cli("remove-orphan-files", str(d), "--older-than", "1d", "--json")
    assert code == 0, out
    assert extra not in json.loads(out)["orphan_file_locations"]
    assert all(os.path.exists(p) for p in (*files, extra))


def test_expire_never_deletes_a_file_a_replaced_manifest_references(tmp_path: Path, cache: Path) -> None:
    d, files = make_table(tmp_path, days=(1, 2))
    table = load_table(str(d))
    first, second = (s.snapshot_id for s in table.metadata.snapshots)
    code, out = cli("rollback", str(d), "--to-snapshot", str(first), "--json")
    assert code == 0, out
    args = ("expire-snapshots", str(d), "--snapshot-id", str(second), "--older-than", "0s", "--json")
    code, out = cli(*args, "--dry-run")
    assert code == 0, out
    assert files[1] in json.loads(out)["would_delete"]["data_files"]  # only the expired snapshot has it
    assert cache_entries(cache) >= 2

    # The first snapshot's manifest now lists the second file too: it stays reachable.
    replace_manifest(d, current_manifests(d)[0], _with_entry_for(files[1]))
    code, out = cli(*args)
    assert code == 0, out
    assert all(os.path.exists(p) for p in files)
    assert files[1] not in out


def test_small_manifests_are_read_directly_and_big_ones_cached(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A one-entry manifest decodes faster from Avro than through the Arrow form and its cache entry
    # (manifest_read.DEFAULT_MIN_CACHED_BYTES): by default it is not cached, answers unchanged.
    d, _ = make_table(tmp_path, days=(1,))
    table = load_table(str(d))
    m = current_manifests(d)[0]
    ptype = table.metadata.partition_type(m.partition_spec_id)
    monkeypatch.delenv("ICECTL_CACHE_MIN_MANIFEST_BYTES")
    assert m.manifest_length < 16_384
    direct = manifest_entries(table.io, m, partition_type=ptype, format_version=2)
    assert cache_entries(cache) == 0
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", str(m.manifest_length))  # now it is big enough
    cached = manifest_entries(table.io, m, partition_type=ptype, format_version=2)
    assert cache_entries(cache) == 1
    assert cached == direct
