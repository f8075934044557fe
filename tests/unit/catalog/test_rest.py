"""icectl.catalog.rest against a real Iceberg REST catalog (SeaweedFS), PyIceberg as the other client.

What SeaweedFS cannot produce on demand (5xx, hangs, expiring tokens) is in test_rest_http.py.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from support.seaweedfs import REGION, SeaweedFS, closed_uri, fresh_namespace

from icectl.catalog.operations import CommitFailedError
from icectl.catalog.rest import RestCatalog
from icectl.config import CatalogConfig
from icectl.errors import NotFoundError, RefusedError, StorageError
from icectl.spec.requirements import AssertRefSnapshotId, AssertTableUUID
from icectl.spec.snapshots import SnapshotRef
from icectl.spec.updates import RemoveSnapshotRef, RemoveSnapshots, SetProperties, SetSnapshotRef, TableChange
from icectl.storage import FileIO, S3Settings


def rest_catalog(server: SeaweedFS, uri: str | None = None, **props: Any) -> RestCatalog:
    cc = CatalogConfig(name="rest", type="rest", warehouse=server.warehouse, uri=uri or server.rest_uri,
                       properties={"credential": server.credential, **props})
    io = FileIO(s3=S3Settings(endpoint=server.s3_endpoint, region=REGION, access_key_id="K",
                              secret_access_key="S"))
    return RestCatalog.from_config(cc, io)


@pytest.fixture
def written(seaweedfs: SeaweedFS) -> tuple[Any, str]:
    """A table PyIceberg wrote with three appends, in a namespace of its own."""
    py = seaweedfs.pyiceberg_catalog()
    ns = fresh_namespace("unit")
    py.create_namespace(ns)
    table = py.create_table(f"{ns}.t", schema=pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    return py, ns


def test_open_takes_prefix_from_the_server(seaweedfs: SeaweedFS) -> None:
    cat = rest_catalog(seaweedfs)
    assert cat.prefix == "warehouse"
    assert cat.table_url(("a", "b"), "t").endswith("/v1/warehouse/namespaces/a%1Fb/tables/t")


def test_namespaces_nested_and_paginated(seaweedfs: SeaweedFS) -> None:
    cat = rest_catalog(seaweedfs, **{"rest-page-size": "1"})  # one namespace per page
    ns = fresh_namespace("pages")
    assert cat.create_namespace((ns,)) is True
    assert cat.create_namespace((ns,), exist_ok=True) is False
    with pytest.raises(RefusedError, match="already exists"):
        cat.create_namespace((ns,))
    for child in ("a", "b", "c"):
        cat.create_namespace((ns, child))
    assert sorted(cat.list_namespaces((ns,))) == [(ns, "a"), (ns, "b"), (ns, "c")]
    assert (ns,) in cat.list_namespaces()
    assert seaweedfs.pyiceberg_catalog().list_namespaces(ns) == [(ns, "a"), (ns, "b"), (ns, "c")]


def test_load_matches_pyiceberg(seaweedfs: SeaweedFS, written: tuple[Any, str]) -> None:
    py, ns = written
    cat = rest_catalog(seaweedfs)
    assert cat.list_tables((ns,)) == [(ns, "t")]
    cur = cat.table_operations((ns,), "t").refresh()
    theirs = py.load_table(f"{ns}.t")
    assert cur.location == theirs.metadata_location
    assert [s.snapshot_id for s in cur.metadata.snapshots] == [s.snapshot_id for s in theirs.snapshots()]
    assert cur.metadata.table_uuid == str(theirs.metadata.table_uuid)


def test_commits_are_applied_by_the_server(seaweedfs: SeaweedFS, written: tuple[Any, str]) -> None:
    py, ns = written
    ops = rest_catalog(seaweedfs).table_operations((ns,), "t")
    cur = ops.refresh()
    first, _, last = (s.snapshot_id for s in cur.metadata.snapshots)
    change = TableChange(
        requirements=(AssertTableUUID(cur.metadata.table_uuid), AssertRefSnapshotId("main", last)),
        updates=(SetProperties({"owner": "icectl"}), SetSnapshotRef("keep", SnapshotRef(first, "tag"))))
    location, md = ops.commit_change(cur, change)
    assert location != cur.location and md.refs["keep"].snapshot_id == first
    theirs = py.load_table(f"{ns}.t")
    assert theirs.metadata_location == location
    assert theirs.properties["owner"] == "icectl" and theirs.metadata.refs["keep"].snapshot_id == first
    cur = ops.refresh()
    location, md = ops.commit_change(cur, TableChange(updates=(RemoveSnapshotRef("keep"),
                                                               RemoveSnapshots((first,)))))
    theirs = py.load_table(f"{ns}.t")
    assert [s.snapshot_id for s in theirs.snapshots()] == [s.snapshot_id for s in md.snapshots]
    assert first not in {s.snapshot_id for s in theirs.snapshots()} and "keep" not in theirs.metadata.refs
    assert sorted(theirs.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2]


def test_lost_race_is_a_commit_failure(seaweedfs: SeaweedFS, written: tuple[Any, str]) -> None:
    py, ns = written
    ops = rest_catalog(seaweedfs).table_operations((ns,), "t")
    cur = ops.refresh()
    py.load_table(f"{ns}.t").append(pa.table({"id": [99]}))  # another writer commits first
    head = cur.metadata.current_snapshot_id
    with pytest.raises(CommitFailedError, match="lost to another writer"):
        ops.commit_change(cur, TableChange(requirements=(AssertRefSnapshotId("main", head),),
                                           updates=(SetProperties({"x": "1"}),)))
    assert "x" not in py.load_table(f"{ns}.t").properties


def test_create_table_from_metadata(seaweedfs: SeaweedFS, written: tuple[Any, str]) -> None:
    py, ns = written
    template = rest_catalog(seaweedfs).table_operations((ns,), "t").refresh().metadata
    fresh = template.replace(snapshots=(), refs={}, current_snapshot_id=None, snapshot_log=(), metadata_log=(),
                             location=None, properties={"made-by": "icectl"})
    ops = rest_catalog(seaweedfs).table_operations((ns,), "made")
    location, md = ops.create(fresh)
    theirs = py.load_table(f"{ns}.made")
    assert theirs.metadata_location == location and theirs.properties["made-by"] == "icectl"
    assert md.format_version == 2 and theirs.scan().to_arrow().num_rows == 0
    with pytest.raises(RefusedError, match="already exists"):
        ops.create(fresh)
    with pytest.raises(RefusedError, match="format version 4"):
        rest_catalog(seaweedfs).table_operations((ns,), "v4").create(fresh.replace(format_version=4))
    assert (ns, "v4") not in rest_catalog(seaweedfs).list_tables((ns,))


def test_hostile_endpoints(seaweedfs: SeaweedFS, written: tuple[Any, str]) -> None:
    _, ns = written
    with pytest.raises(StorageError, match="credentials rejected by REST catalog") as bad:
        rest_catalog(seaweedfs, credential="K:wrong")
    with pytest.raises(StorageError, match="credentials rejected") as bad_token:
        cc = CatalogConfig(name="rest", type="rest", warehouse=seaweedfs.warehouse, uri=seaweedfs.rest_uri,
                           properties={"token": "forged"})
        RestCatalog.from_config(cc, FileIO()).list_tables((ns,))
    with pytest.raises(StorageError, match="cannot reach REST catalog") as down:
        rest_catalog(seaweedfs, uri=closed_uri())
    with pytest.raises(NotFoundError, match="not found in REST catalog") as missing:
        rest_catalog(seaweedfs).table_operations((ns,), "nope").refresh()
    for info in (bad, bad_token, down, missing):
        assert "\n" not in info.value.one_line()
    assert (bad.value.exit_code, down.value.exit_code, missing.value.exit_code) == (8, 8, 3)


def test_vended_credentials_are_used_for_the_tables_files(seaweedfs: SeaweedFS,
                                                          written: tuple[Any, str]) -> None:
    py, ns = written
    other = py.create_table(f"{ns}.other", schema=pa.schema([("id", pa.int64())]))
    other.append(pa.table({"id": [7]}))
    # The catalog-wide keys are wrong: only the vended ones can read the table's files.
    io = FileIO(s3=S3Settings(endpoint=seaweedfs.s3_endpoint, region=REGION, access_key_id="K",
                              secret_access_key="wrong"))
    ops = rest_catalog(seaweedfs).table_operations((ns,), "t")
    ops.catalog.io = io
    current = ops.refresh()
    manifest_list = current.metadata.current_snapshot().manifest_list
    vended = ops.io.s3
    assert vended.access_key_id != "K" and vended.session_token and vended.path_style is True
    assert ops.io.read(manifest_list)[:4] == b"Obj\x01"  # Avro
    with pytest.raises(StorageError):
        io.read(manifest_list)
    # Scoped to the table: the same keys cannot read the table next door.
    with pytest.raises(StorageError):
        ops.io.read(py.load_table(f"{ns}.other").current_snapshot().manifest_list)
