"""The manifest cache store (icectl/table/manifest_cache.py): keys, verification of what it reads,
least-recently-used eviction, configuration. Real files in a temp folder; the identities of
real files come from tests/unit/table/test_manifest_cache_storage.py's side (FileIO)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import tomllib

from icectl.config import DEFAULT_CACHE_MAX_BYTES, CacheConfig, parse_config, parse_size
from icectl.errors import CorruptInputError
from icectl.storage import FileIdentity
from icectl.table import manifest_cache as mc
from icectl.table.manifest_cache import HEADER_SIZE, ManifestCache

LOC = "/wh/db/t/metadata/abc-m0.avro"
ID1 = FileIdentity(4096, "1700000000000000000:1700000000000000000:42")


def table_of(n: int, tag: str = "x") -> pa.Table:
    t = pa.table({"file_path": [f"/wh/db/t/data/{tag}-{i}.parquet" for i in range(n)],
                  "record_count": pa.array(range(n), pa.int64()),
                  "lower": pa.array([bytes([i % 256]) * 8 for i in range(n)], pa.binary())})
    return t.replace_schema_metadata({"partition-spec-id": "0", "tag": tag})


@pytest.fixture
def cache(tmp_path: Path) -> ManifestCache:
    return ManifestCache(tmp_path / "c", max_bytes=DEFAULT_CACHE_MAX_BYTES)


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process-wide settings start from the environment and end as they were."""
    for name in ("ICECTL_CACHE", "ICECTL_CACHE_MAX_SIZE", "ICECTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    mc.configure_cache(None)
    mc.set_cache_enabled(True)
    yield
    mc.configure_cache(None)
    mc.set_cache_enabled(True)


def entry_files(cache: ManifestCache) -> list[Path]:
    return sorted(cache.folder.glob("*.arrow"))


# -- hits and misses ---------------------------------------------------------------------------


def test_miss_then_hit_returns_the_same_table_and_its_metadata(cache: ManifestCache) -> None:
    t = table_of(100)
    assert cache.get("manifest/1", LOC, ID1) is None
    cache.put("manifest/1", LOC, ID1, t)
    got = cache.get("manifest/1", LOC, ID1)
    assert got is not None
    assert got.equals(t)
    assert got.schema.metadata == t.schema.metadata  # the cache's own keys are taken off again
    assert (cache.hits, cache.misses, cache.puts) == (1, 1, 1)


def test_a_table_without_metadata_comes_back_without(cache: ManifestCache) -> None:
    t = pa.table({"a": [1, 2]})
    cache.put("manifest/1", LOC, ID1, t)
    got = cache.get("manifest/1", LOC, ID1)
    assert got is not None and got.equals(t) and got.schema.metadata is None


@pytest.mark.parametrize("other", [
    ("manifest-list/1", LOC, ID1),  # another kind (or layout version) of the same file
    ("manifest/2", LOC, ID1),
    ("manifest/1", LOC.replace("m0", "m1"), ID1),  # another file
    ("manifest/1", LOC, FileIdentity(4097, ID1.version)),  # same version text, other length
    ("manifest/1", LOC, FileIdentity(4096, "1700000000000000001:1700000000000000000:42")),  # mtime
    ("manifest/1", LOC, FileIdentity(4096, "1700000000000000000:1700000000000000001:42")),  # ctime
    ("manifest/1", LOC, FileIdentity(4096, "1700000000000000000:1700000000000000000:43")),  # inode
])
def test_any_other_key_misses(cache: ManifestCache, other: tuple[str, str, FileIdentity]) -> None:
    cache.put("manifest/1", LOC, ID1, table_of(3))
    assert cache.get(*other) is None
    assert cache.get("manifest/1", LOC, ID1) is not None


def test_spellings_of_one_file_share_an_entry(cache: ManifestCache) -> None:
    cache.put("manifest/1", f"file://{LOC}", ID1, table_of(3))
    assert cache.get("manifest/1", LOC, ID1) is not None
    assert cache.get("manifest/1", f"file:{LOC}", ID1) is not None
    cache.put("manifest/1", "s3a://b/t/m.avro", ID1, table_of(3))
    assert cache.get("manifest/1", "s3://b/t/m.avro", ID1) is not None


def test_a_racy_identity_is_never_stored_nor_read(cache: ManifestCache) -> None:
    racy = FileIdentity(ID1.length, ID1.version, cacheable=False)
    assert racy == ID1  # the same version: only the advice differs
    cache.put("manifest/1", LOC, racy, table_of(3))
    assert entry_files(cache) == []
    cache.put("manifest/1", LOC, ID1, table_of(3))
    assert cache.get("manifest/1", LOC, racy) is None
    assert cache.get("manifest/1", LOC, ID1) is not None


def test_an_entry_bigger_than_a_tenth_of_the_bound_is_not_stored(tmp_path: Path) -> None:
    cache = ManifestCache(tmp_path, max_bytes=100_000)
    cache.put("manifest/1", LOC, ID1, table_of(2000))  # ~60 KB of Arrow
    assert entry_files(cache) == []
    cache.put("manifest/1", LOC, ID1, table_of(5))
    assert len(entry_files(cache)) == 1


def test_a_hit_stays_readable_after_its_file_is_evicted(cache: ManifestCache) -> None:
    t = table_of(50)
    cache.put("manifest/1", LOC, ID1, t)
    got = cache.get("manifest/1", LOC, ID1)
    for f in entry_files(cache):
        f.unlink()  # another process's eviction or `cache clear`, while this one holds the table
    assert got is not None and got.equals(t) and got.column("file_path")[49].as_py().endswith("x-49.parquet")
    assert cache.get("manifest/1", LOC, ID1) is None


# -- broken entries ----------------------------------------------------------------------------------


def _break_truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:-100])


def _break_flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[HEADER_SIZE + len(data[HEADER_SIZE:]) // 2] ^= 0x40  # one bit in the Arrow body
    p.write_bytes(bytes(data))


def _break_empty(p: Path) -> None:
    p.write_bytes(b"")


def _break_garbage(p: Path) -> None:
    p.write_bytes(os.urandom(5000))


def _break_plain_arrow(p: Path) -> None:
    """A valid Arrow IPC file, but not one the cache wrote (no header)."""
    sink = pa.BufferOutputStream()
    t = table_of(3)
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    p.write_bytes(sink.getvalue().to_pybytes())


def _break_old_format(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[8] = 99  # the format number of the header
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_break_truncate, _break_flip, _break_empty, _break_garbage,
                                    _break_plain_arrow, _break_old_format])
def test_a_broken_entry_is_a_miss_is_removed_and_is_replaced(cache: ManifestCache, damage: object) -> None:
    t = table_of(200)
    cache.put("manifest/1", LOC, ID1, t)
    [entry] = entry_files(cache)
    damage(entry)  # type: ignore[operator]
    assert cache.get("manifest/1", LOC, ID1) is None
    assert not entry.exists()
    cache.put("manifest/1", LOC, ID1, t)
    got = cache.get("manifest/1", LOC, ID1)
    assert got is not None and got.equals(t)


def test_an_entry_of_another_file_under_this_name_is_not_taken(cache: ManifestCache) -> None:
    """A foreign (or hash-colliding) entry: whole and valid, but its metadata names another key."""
    other = FileIdentity(ID1.length, "another-version")
    cache.put("manifest/1", LOC, other, table_of(7, "other"))
    os.replace(cache.path_of("manifest/1", LOC, other), cache.path_of("manifest/1", LOC, ID1))
    assert cache.get("manifest/1", LOC, ID1) is None
    assert entry_files(cache) == []


def test_a_folder_where_an_entry_should_be_is_a_miss(cache: ManifestCache) -> None:
    cache.path_of("manifest/1", LOC, ID1).mkdir(parents=True)
    assert cache.get("manifest/1", LOC, ID1) is None


# -- least recently used -----------------------------------------------------------------------------


def _ids(n: int) -> list[FileIdentity]:
    return [FileIdentity(1000 + i, f"v{i}") for i in range(n)]


def test_eviction_keeps_the_total_under_the_bound_and_spares_what_was_used(tmp_path: Path) -> None:
    probe = ManifestCache(tmp_path / "probe")
    probe.put("manifest/1", LOC, ID1, table_of(20))
    size = entry_files(probe)[0].stat().st_size
    cache = ManifestCache(tmp_path / "c", max_bytes=size * 20)  # room for 20 entries
    ids = _ids(20)
    for i in ids:
        cache.put("manifest/1", LOC, i, table_of(20))
    assert len(entry_files(cache)) == 20
    assert cache.get("manifest/1", LOC, ids[0]) is not None  # used: now the most recent
    cache.put("manifest/1", LOC, FileIdentity(5000, "new"), table_of(20))  # over the bound
    kept = {i.version for i in ids if cache.path_of("manifest/1", LOC, i).exists()}
    total = sum(f.stat().st_size for f in entry_files(cache))
    assert total <= size * 20 * 0.9  # down to 90% of the bound, not just under it
    assert "v0" in kept  # the entry used after it was written stays
    assert kept == {"v0"} | {f"v{i}" for i in range(4, 20)}  # 21 -> 18 entries: v1..v3 went first
    assert cache.path_of("manifest/1", LOC, FileIdentity(5000, "new")).exists()


def test_writers_sharing_a_folder_see_each_others_entries(tmp_path: Path) -> None:
    """Two caches on one folder (two processes): each rescans after writing a tenth of the bound, so
    together they keep the folder near the bound, not at one bound per writer."""
    probe = ManifestCache(tmp_path / "probe")
    probe.put("manifest/1", LOC, ID1, table_of(20))
    size = entry_files(probe)[0].stat().st_size
    bound = size * 40
    a, b = ManifestCache(tmp_path / "c", max_bytes=bound), ManifestCache(tmp_path / "c", max_bytes=bound)
    for n, i in enumerate(_ids(200)):
        (a if n % 2 else b).put("manifest/1", LOC, i, table_of(20))
    total = sum(f.stat().st_size for f in entry_files(a))
    assert total <= bound * 1.25, total / bound  # each alone counting its own writes: ~2x


def test_a_new_process_evicts_by_last_use_on_disk(tmp_path: Path) -> None:
    """Another process's order of use is the files' mtimes: its scan orders by them."""
    first = ManifestCache(tmp_path)
    ids = _ids(30)
    for i in ids:
        first.put("manifest/1", LOC, i, table_of(20))
    size = max(f.stat().st_size for f in entry_files(first))
    order = list(range(0, 30, 2)) + list(range(1, 30, 2))[::-1]  # least recently used first
    for rank, i in enumerate(order):
        t = 1_700_000_000_000_000_000 + rank * 1_000_000_000
        os.utime(first.path_of("manifest/1", LOC, ids[i]), ns=(t, t))
    second = ManifestCache(tmp_path, max_bytes=size * 30)
    second.put("manifest/1", LOC, FileIdentity(9999, "new"), table_of(20))  # 31 entries: over by one
    gone = [i for i in range(30) if not second.path_of("manifest/1", LOC, ids[i]).exists()]
    assert gone == sorted(order[:4])  # 31 -> at most 27 entries (90%), least recently used first


def test_eviction_copes_with_entries_removed_by_someone_else(tmp_path: Path) -> None:
    probe = ManifestCache(tmp_path / "probe")
    probe.put("manifest/1", LOC, ID1, table_of(20))
    size = entry_files(probe)[0].stat().st_size
    cache = ManifestCache(tmp_path / "c", max_bytes=size * 20)
    for i in _ids(15):
        cache.put("manifest/1", LOC, i, table_of(20))
    for f in entry_files(cache)[:10]:
        f.unlink()  # a concurrent `cache clear`
    for i in _ids(30)[15:]:
        cache.put("manifest/1", LOC, i, table_of(20))
    # The gone entries are taken out of the running total as eviction finds them; the folder never
    # goes over the bound, nor far under it.
    assert 15 <= len(entry_files(cache)) <= 20
    assert sum(f.stat().st_size for f in entry_files(cache)) <= size * 20
    assert cache.path_of("manifest/1", LOC, _ids(30)[29]).exists()
    assert cache.writable


def test_clear_and_dry_run(cache: ManifestCache) -> None:
    for i in _ids(3):
        cache.put("manifest/1", LOC, i, table_of(5))
    total = sum(f.stat().st_size for f in entry_files(cache))
    assert cache.clear(dry_run=True) == (3, total)
    assert len(entry_files(cache)) == 3
    assert cache.clear() == (3, total)
    assert entry_files(cache) == []
    assert cache.info().entries == 0


# -- configuration -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "n"), [("2GiB", 2 * 1024**3), ("500MB", 500_000_000), ("64k", 64_000),
                                         ("1.5 MiB", 1_572_864), (4096, 4096), ("10", 10)])
def test_parse_size(text: str | int, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "2 GiBs", "-1", "lots", True, -5])
def test_parse_size_refuses(text: str | int) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_config_cache_section() -> None:
    assert parse_config({}).cache == CacheConfig(None, DEFAULT_CACHE_MAX_BYTES)
    c = parse_config({"cache": {"dir": "/var/cache/ice", "max-size": "500MB"}}).cache
    assert (c.dir, c.max_bytes) == ("/var/cache/ice", 500_000_000)
    with pytest.raises(CorruptInputError, match="max-size"):
        parse_config({"cache": {"max-size": "big"}})
    with pytest.raises(CorruptInputError, match=r"\[cache\]"):
        parse_config({"cache": "on"})


def test_the_readme_example_sets_the_cache() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    example = re.findall(r"```toml\n(.*?)```", readme, flags=re.S)[0]
    c = parse_config(tomllib.loads(example)).cache
    assert (c.dir, c.max_bytes) == (os.path.expanduser("~/.cache/icectl"), 2 * 1024**3)


def test_where_the_cache_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_settings: None) -> None:
    config = tmp_path / "icectl.toml"
    config.write_text(f'[cache]\ndir = "{tmp_path / "from-config"}"\nmax-size = "1MiB"\n')
    monkeypatch.setenv("ICECTL_CONFIG", str(config))
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(tmp_path / "from-env"))
    assert mc.cache_dir() == tmp_path / "from-env"
    assert mc.cache_bound() == 1024**2
    monkeypatch.setenv("ICECTL_CACHE_MAX_SIZE", "3MiB")
    assert mc.cache_bound() == 3 * 1024**2
    monkeypatch.delenv("ICECTL_CACHE_DIR")
    assert mc.cache_dir() == tmp_path / "from-config"
    mc.configure_cache(CacheConfig())  # a config file without [cache]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert mc.cache_dir() == tmp_path / "xdg" / "icectl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert mc.cache_dir() == tmp_path / "home" / ".cache" / "icectl"


def test_the_process_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             fresh_settings: None) -> None:
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(tmp_path))
    cache = mc.manifest_cache()
    assert cache is not None and cache.root == tmp_path and mc.manifest_cache() is cache
    monkeypatch.setenv("ICECTL_CACHE", "off")
    assert mc.manifest_cache() is None
    assert mc.cache_info().enabled is False
    monkeypatch.setenv("ICECTL_CACHE", "on")
    assert mc.manifest_cache() is cache
    mc.set_cache_enabled(False)  # --no-cache
    assert mc.manifest_cache() is None


def test_the_test_session_never_uses_the_users_cache() -> None:
    home_cache = Path.home() / ".cache" / "icectl"
    assert mc.cache_dir() != home_cache
    assert os.environ["ICECTL_CACHE_DIR"]


def test_clear_and_eviction_delete_only_the_caches_own_files(tmp_path: Path) -> None:
    # ICECTL_CACHE_DIR pointed at a folder holding other files: a user's Arrow file, an old temp-like
    # name, a link to a file elsewhere. Neither `clear` nor eviction may touch them.
    cache = ManifestCache(tmp_path / "c", max_bytes=DEFAULT_CACHE_MAX_BYTES)
    cache.put("manifest/1", LOC, ID1, table_of(20))
    outside = tmp_path / "precious.arrow"
    outside.write_bytes(b"x" * 100)
    foreign = [cache.folder / "results.arrow", cache.folder / ".tmp-notes", cache.folder / ("a" * 40 + ".arrow.bak")]
    for f in foreign:
        f.write_bytes(b"y" * 100)
        old = 1_600_000_000
        os.utime(f, (old, old))  # older than the stale-temp limit
    (cache.folder / ("b" * 40 + ".arrow")).symlink_to(outside)
    size = max(f.stat().st_size for f in entry_files(cache))
    small = ManifestCache(tmp_path / "c", max_bytes=size * 11)
    for i in _ids(15):  # past the bound: eviction runs
        small.put("manifest/1", LOC, i, table_of(20))
    assert len(entry_files(small)) < 15
    assert all(f.exists() for f in foreign)
    cache.clear()
    assert all(f.exists() for f in foreign)
    assert outside.read_bytes() == b"x" * 100  # a link is removed as a link at most, never followed
    assert not list(cache.folder.glob("[0-9a-f]" * 40 + ".arrow"))  # its own entries are gone
