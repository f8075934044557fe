"""add-files sets the name mapping inside its commit's build: a retry rebuilds it on the fresh base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.forge import property_change
from typer.testing import CliRunner

import icectl.ops.files.add_files
import icectl.table.snapshot_writer
from icectl.cli.app import app
from icectl.ops.files.add_files import add_files
from icectl.spec.name_mapping import DEFAULT_NAME_MAPPING
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.snapshot_writer import branch_head


def _table(tmp_path: Path) -> tuple[str, str]:
    d = str(tmp_path / "t")
    r = CliRunner().invoke(app, ["create", d, "--schema", "id long, name string"])
    assert r.exit_code == 0, r.stderr
    f = tmp_path / "f.parquet"
    pq.write_table(pa.table({"name": ["a"], "id": pa.array([1], pa.int64())}), f)
    return d, str(f)


def test_retry_keeps_a_concurrent_property_and_sets_the_mapping(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    d, f = _table(tmp_path)
    calls = 0

    def racing_branch_head(*args: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # inside the first build: another writer commits before ours is published
            commit(load_table(d), lambda md: property_change({"owner": "ops"}))
        return branch_head(*args, **kw)

    monkeypatch.setattr(icectl.ops.files.add_files, "branch_head", racing_branch_head)
    monkeypatch.setattr(icectl.table.snapshot_writer, "branch_head", racing_branch_head)
    out = add_files(load_table(d), [f])
    assert out.data["commit_attempts"] == 2 and out.data["name_mapping"] == "created"
    props = load_table(d).metadata.properties
    assert props["owner"] == "ops"
    assert [m["names"] for m in json.loads(props[DEFAULT_NAME_MAPPING])] == [["id"], ["name"]]


def test_retry_extends_a_mapping_set_meanwhile(tmp_path: Path) -> None:
    d, f = _table(tmp_path)
    stale = load_table(d)
    theirs = json.dumps([{"field-id": 1, "names": ["id", "pk"]}])
    commit(load_table(d), lambda md: property_change({DEFAULT_NAME_MAPPING: theirs}))
    out = add_files(stale, [f])
    assert out.data["name_mapping"] == "extended"
    mapping = json.loads(load_table(d).metadata.properties[DEFAULT_NAME_MAPPING])
    assert mapping == [{"field-id": 1, "names": ["id", "pk"]}, {"field-id": 2, "names": ["name"]}]


def test_dry_run_and_a_bad_mapping(tmp_path: Path) -> None:
    d, f = _table(tmp_path)
    out = add_files(load_table(d), [f], dry_run=True)
    assert out.data["name_mapping"] == "would be created"
    assert DEFAULT_NAME_MAPPING not in load_table(d).metadata.properties
    commit(load_table(d), lambda md: property_change({DEFAULT_NAME_MAPPING: "{oops"}))
    version = (Path(d) / "metadata" / "version-hint.text").read_text()
    r = CliRunner().invoke(app, ["add-files", d, f])
    assert r.exit_code == 4 and DEFAULT_NAME_MAPPING in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (Path(d) / "metadata" / "version-hint.text").read_text() == version
