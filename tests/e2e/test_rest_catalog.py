"""Every command through a REST catalog (SeaweedFS on 127.0.0.1), PyIceberg as the other client.

PyIceberg writes the tables and judges the results (snapshots, refs, files, rows at every retained
snapshot); the S3 bucket is listed before and after each deleting command so "deletes exactly the
unreachable files" is checked against the store itself, not against icectl's own report.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.seaweedfs import CatalogProxy, SeaweedFS, closed_uri, fresh_namespace
from typer.testing import CliRunner

from icectl.catalog.operations import CommitFailedError
from icectl.catalog.rest import RestOperations
from icectl.cli.app import app

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])


class Icectl:
    """The CLI on one config file; the AWS variables of the machine are kept out."""

    def __init__(self, config: Path) -> None:
        self.config = config

    def run(self, *args: str, expect: int = 0) -> Any:
        r = CliRunner().invoke(app, ["--config", str(self.config), *args])
        assert r.exit_code == expect, f"exit {r.exit_code}, stderr: {r.stderr}\nstdout: {r.stdout}"
        return r

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def json_lines(self, *args: str) -> list[Any]:
        """``--all --json``: one document per table."""
        return [json.loads(ln) for ln in self.run(*args, "--json").stdout.splitlines() if ln.strip()]

    def fails(self, *args: str, expect: int) -> str:
        """The one stderr line of a command that must fail with ``expect``."""
        r = self.run(*args, expect=expect)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, r.stderr
        assert "Traceback" not in r.stderr
        return lines[0]


@pytest.fixture
def icectl(seaweedfs: SeaweedFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Icectl:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "ICECTL_WAREHOUSE", "ICECTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return Icectl(seaweedfs.icectl_config(tmp_path / "icectl.toml"))


def rows(start: int, n: int, region: str = "eu") -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "region": [region] * n}, schema=SCHEMA)


def write_history(server: SeaweedFS, ns: str, name: str = "t") -> Any:
    """PyIceberg: three appends, an overwrite (the first files become unreachable), one more append."""
    py = server.pyiceberg_catalog()
    py.create_namespace_if_not_exists(ns)
    table = py.create_table(f"{ns}.{name}", schema=SCHEMA)
    for i in range(3):
        table.append(rows(i * 10, 10))
    table.overwrite(rows(100, 5, "us"))
    table.append(rows(200, 5, "us"))
    return py.load_table(f"{ns}.{name}")


def reachable(table: Any, snapshot: Any) -> set[str]:
    """Files a snapshot needs: its manifest list, manifests, and live data/delete files."""
    out = {snapshot.manifest_list}
    for manifest in snapshot.manifests(table.io):
        out.add(manifest.manifest_path)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            out.add(entry.data_file.file_path)
    return out


def ids_at(table: Any, snapshot_id: int) -> list[int]:
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow()["id"].to_pylist())


def test_inspect_matches_pyiceberg(seaweedfs: SeaweedFS, icectl: Icectl) -> None:
    ns = fresh_namespace("inspect")
    table = write_history(seaweedfs, ns)
    first = table.snapshots()[0].snapshot_id
    table.manage_snapshots().create_tag(first, "first").commit()
    table = seaweedfs.pyiceberg_catalog().load_table(f"{ns}.t")
    snaps = icectl.json("inspect", "snapshots", f"{ns}.t")["rows"]
    assert [s["snapshot_id"] for s in snaps] == [s.snapshot_id for s in table.snapshots()]
    refs = {r["name"]: r["snapshot_id"] for r in icectl.json("inspect", "refs", f"{ns}.t")["rows"]}
    assert refs == {name: ref.snapshot_id for name, ref in table.metadata.refs.items()}
    files = {f["file_path"] for f in icectl.json("inspect", "files", f"{ns}.t")["rows"]}
    assert files == set(table.inspect.files()["file_path"].to_pylist()) and files
    tagged = {f["file_path"] for f in icectl.json("inspect", "files", f"{ns}.t", "--ref", "first")["rows"]}
    assert tagged == set(table.inspect.files(snapshot_id=first)["file_path"].to_pylist())
    assert icectl.json("inspect", "table", f"rest.{ns}.t")["metadata_location"] == table.metadata_location


def test_expire_deletes_exactly_the_unreachable_files(seaweedfs: SeaweedFS, icectl: Icectl) -> None:
    ns = fresh_namespace("expire")
    table = write_history(seaweedfs, ns)
    snapshots = table.snapshots()
    retained = snapshots[-2:]
    expected_rows = {s.snapshot_id: ids_at(table, s.snapshot_id) for s in retained}
    keep = set().union(*(reachable(table, s) for s in retained))
    gone = set().union(*(reachable(table, s) for s in snapshots[:-2])) - keep
    assert gone, "the history must leave unreachable files, or the test proves nothing"
    before = seaweedfs.list_keys(f"{ns}/")
    icectl.run("expire-snapshots", f"{ns}.t", "--older-than", "0ms", "--retain-last", "2")
    after = seaweedfs.list_keys(f"{ns}/")
    assert before - after == gone
    assert keep <= after
    table = seaweedfs.pyiceberg_catalog().load_table(f"{ns}.t")
    assert [s.snapshot_id for s in table.snapshots()] == [s.snapshot_id for s in retained]
    for sid, ids in expected_rows.items():
        assert ids_at(table, sid) == ids
    assert "metadata/" in table.metadata_location  # the server wrote the new version, not icectl


def test_compact_keeps_rows(seaweedfs: SeaweedFS, icectl: Icectl) -> None:
    ns = fresh_namespace("compact")
    py = seaweedfs.pyiceberg_catalog()
    py.create_namespace(ns)
    table = py.create_table(f"{ns}.t", schema=SCHEMA)
    for i in range(5):
        table.append(rows(i * 10, 10))
    table = py.load_table(f"{ns}.t")
    before_ids = ids_at(table, table.current_snapshot().snapshot_id)
    assert len(table.current_snapshot().manifests(table.io)) == 5
    icectl.run("compact", f"{ns}.t")
    table = py.load_table(f"{ns}.t")
    assert len(table.current_snapshot().manifests(table.io)) == 1
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == before_ids
    icectl.run("validate", f"{ns}.t", "--deep")


def test_create_and_add_files(seaweedfs: SeaweedFS, icectl: Icectl, tmp_path: Path) -> None:
    ns = fresh_namespace("create")
    icectl.run("namespace", "create", ns)
    created = icectl.json("create", f"{ns}.made", "--schema", "id long, region string", "--partition-by", "region")
    assert created["metadata_location"].startswith(f"s3://{seaweedfs.bucket}/")
    # A table bucket takes objects only under a table's location: the writer puts the file there.
    location = seaweedfs.pyiceberg_catalog().load_table(f"{ns}.made").location()
    local = tmp_path / "part.parquet"
    pq.write_table(rows(0, 20), local)
    key = f"{location.split('/', 3)[3]}/data/region=eu/part.parquet"
    seaweedfs.s3_client().upload_file(str(local), seaweedfs.bucket, key)
    icectl.run("add-files", f"{ns}.made", f"s3://{seaweedfs.bucket}/{key}")
    table = seaweedfs.pyiceberg_catalog().load_table(f"{ns}.made")
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range(20))
    assert [f.name for f in table.spec().fields] == ["region"]
    icectl.run("validate", f"{ns}.made")
    line = icectl.fails("create", f"{ns}.made", "--schema", "id long", expect=6)
    assert "already exists" in line


def test_upgrade_to_v4_is_refused(seaweedfs: SeaweedFS, icectl: Icectl) -> None:
    ns = fresh_namespace("v4")
    table = write_history(seaweedfs, ns)
    before = seaweedfs.list_keys(f"{ns}/")
    line = icectl.fails("upgrade", f"{ns}.t", "--to", "4", "--yes", expect=6)
    assert "REST" in line and "format version 4" in line
    assert seaweedfs.list_keys(f"{ns}/") == before
    assert seaweedfs.pyiceberg_catalog().load_table(f"{ns}.t").metadata_location == table.metadata_location
    icectl.run("upgrade", f"{ns}.t", "--to", "3")
    assert seaweedfs.pyiceberg_catalog().load_table(f"{ns}.t").format_version == 3


def test_all_over_the_catalog(seaweedfs: SeaweedFS, icectl: Icectl) -> None:
    ns = fresh_namespace("all")
    for name in ("a", "b"):
        write_history(seaweedfs, ns, name)
    # The whole catalog (every namespace of the session's server), as a dry run: it touches nothing.
    everything = icectl.json_lines("expire-snapshots", "--all", "--dry-run", "--older-than", "0ms")
    assert {f"{ns}.a", f"{ns}.b"} <= {r["table"] for r in everything}
    listed = icectl.json("list", ns)["rows"]
    assert sorted(r["table"] for r in listed) == ["a", "b"]
    expired = icectl.json_lines("expire-snapshots", "--all", ns, "--older-than", "0ms", "--retain-last", "1")
    assert sorted((r["table"], r["expired_snapshot_count"]) for r in expired) == [(f"{ns}.a", 5), (f"{ns}.b", 5)]
    compacted = icectl.json_lines("compact", "--all", ns)
    assert sorted(r["table"] for r in compacted) == [f"{ns}.a", f"{ns}.b"]
    py = seaweedfs.pyiceberg_catalog()
    for name in ("a", "b"):
        t = py.load_table(f"{ns}.{name}")
        assert len(t.snapshots()) == 2  # the expire kept 1, compact added one
        assert sorted(t.scan().to_arrow()["id"].to_pylist()) == list(range(100, 105)) + list(range(200, 205))


MAX_APPENDS = 40


def test_concurrent_appends_are_never_lost(seaweedfs: SeaweedFS, icectl: Icectl,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from pyiceberg.exceptions import CommitFailedException

    ns = fresh_namespace("race")
    py = seaweedfs.pyiceberg_catalog()
    py.create_namespace(ns)
    # icectl's retry loop gets room against a writer that never pauses long (Java's defaults: 4 retries).
    py.create_table(f"{ns}.t", schema=SCHEMA, properties={
        "commit.retry.num-retries": "20", "commit.retry.min-wait-ms": "20"}).append(rows(0, 10))
    appended: list[int] = []
    errors: list[BaseException] = []
    lost = {"pyiceberg": 0, "icectl": 0}
    icectl_done = threading.Event()
    commit_change = RestOperations.commit_change

    def counting(self: RestOperations, base: Any, change: Any) -> Any:
        try:
            return commit_change(self, base, change)
        except CommitFailedError:
            lost["icectl"] += 1  # the retry loop reloads and goes again
            raise

    monkeypatch.setattr(RestOperations, "commit_change", counting)

    class PyIcebergRetries(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "concurrent update" in record.getMessage():
                lost["pyiceberg"] += 1  # PyIceberg lost a race and retries by itself

    counter = PyIcebergRetries()
    logging.getLogger("pyiceberg.table").addHandler(counter)

    def writer() -> None:
        """Appends until icectl has done its rounds (and at least 5 times), at most MAX_APPENDS times:
        a writer that never stops would starve icectl's retries on a loaded machine (each append
        adds a manifest, so compaction's attempt grows while the appends keep their pace; on two
        busy cores icectl lost 21 attempts in a row), and the races happen early anyway."""
        try:
            i = 0
            while (not icectl_done.is_set() or i < 5) and i < MAX_APPENDS:
                i += 1
                while True:
                    try:
                        seaweedfs.pyiceberg_catalog().load_table(f"{ns}.t").append(rows(i * 10, 10))
                        break
                    except CommitFailedException:
                        lost["pyiceberg"] += 1  # PyIceberg retried 4 times already: so do we
                appended.append(i)
                time.sleep(0.05)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(3):
            icectl.run("expire-snapshots", f"{ns}.t", "--older-than", "0ms", "--retain-last", "2")
            icectl.run("compact", f"{ns}.t", "--min-manifests", "2")
    finally:
        icectl_done.set()
        thread.join()
        logging.getLogger("pyiceberg.table").removeHandler(counter)
    print(f"[race] {len(appended)} appends, races lost: {lost}")
    assert not errors, errors
    assert appended == list(range(1, len(appended) + 1)) and len(appended) >= 5
    assert sum(lost.values()) >= 1, "no race happened: the test proved nothing"
    table = py.load_table(f"{ns}.t")
    # Every append is in the table, and every file it references is still in the bucket.
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range((len(appended) + 1) * 10))
    live = reachable(table, table.current_snapshot())
    assert live <= seaweedfs.list_keys(f"{ns}/")
    icectl.run("validate", f"{ns}.t", "--deep")


def test_hostile_catalogs(seaweedfs: SeaweedFS, icectl: Icectl, tmp_path: Path) -> None:
    ns = fresh_namespace("hostile")
    table = write_history(seaweedfs, ns)
    before = seaweedfs.list_keys(f"{ns}/")
    bad = Icectl(seaweedfs.icectl_config(tmp_path / "bad.toml", credential="K:wrong"))
    line = bad.fails("expire-snapshots", f"{ns}.t", "--older-than", "0ms", "--retain-last", "1", expect=8)
    assert "credentials rejected by REST catalog" in line
    down = Icectl(seaweedfs.icectl_config(tmp_path / "down.toml", uri=closed_uri()))
    line = down.fails("expire-snapshots", f"{ns}.t", "--older-than", "0ms", "--retain-last", "1", expect=8)
    assert "cannot reach REST catalog" in line
    wrong = Icectl(seaweedfs.icectl_config(tmp_path / "wrong.toml", uri=seaweedfs.s3_endpoint))
    line = wrong.fails("inspect", "snapshots", f"{ns}.t", expect=8)  # an S3 endpoint is no REST catalog
    assert "not a REST catalog" in line
    line = icectl.fails("expire-snapshots", f"{ns}.nope", "--older-than", "0ms", expect=3)
    assert f"{ns}.nope" in line
    assert seaweedfs.list_keys(f"{ns}/") == before
    assert seaweedfs.pyiceberg_catalog().load_table(f"{ns}.t").metadata_location == table.metadata_location


def test_a_commit_answered_with_5xx_is_unknown_and_nothing_is_cleaned(
        seaweedfs: SeaweedFS, catalog_proxy: CatalogProxy, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The server applies the commit, the answer is lost (a 502 from a gateway): icectl must say the
    state is unknown (exit 5) and must not delete the manifests it wrote: the table now uses them."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "ICECTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    ns = fresh_namespace("unknown")
    py = seaweedfs.pyiceberg_catalog()
    py.create_namespace(ns)
    table = py.create_table(f"{ns}.t", schema=SCHEMA)
    for i in range(4):
        table.append(rows(i * 10, 10))
    before = py.load_table(f"{ns}.t").metadata_location
    catalog_proxy.commit_status = 502
    via_proxy = Icectl(seaweedfs.icectl_config(tmp_path / "proxy.toml", uri=catalog_proxy.uri))
    line = via_proxy.fails("compact", f"{ns}.t", expect=5)
    assert "may or may not have happened" in line and "nothing was cleaned up" in line
    assert catalog_proxy.commits_forwarded == 1  # no blind retry of a commit that may have happened
    table = py.load_table(f"{ns}.t")
    assert table.metadata_location != before  # it did happen
    assert len(table.current_snapshot().manifests(table.io)) == 1
    assert reachable(table, table.current_snapshot()) <= seaweedfs.list_keys(f"{ns}/")
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range(40))


def test_commands_use_the_vended_credentials(seaweedfs: SeaweedFS, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """[s3] holds a wrong secret: reading, committing and deleting work only with the keys the
    catalog vends for the table."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "ICECTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    ns = fresh_namespace("vended")
    table = write_history(seaweedfs, ns)
    gone = reachable(table, table.snapshots()[0]) - reachable(table, table.snapshots()[-1])
    assert gone
    icectl = Icectl(seaweedfs.icectl_config(tmp_path / "vended.toml", s3_secret="wrong"))
    files = {f["file_path"] for f in icectl.json("inspect", "files", f"{ns}.t")["rows"]}
    assert files == set(table.inspect.files()["file_path"].to_pylist())
    icectl.run("expire-snapshots", f"{ns}.t", "--older-than", "0ms", "--retain-last", "1")
    assert not gone & seaweedfs.list_keys(f"{ns}/")
    icectl.run("validate", f"{ns}.t", "--deep")
