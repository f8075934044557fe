"""`icectl create`, `namespace` and `list` through the CLI: outputs, refusals and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode


def run(*args: str, wh: Path) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""})
    return r.exit_code, r.stdout, r.stderr


def test_namespace_create_list_and_refuse_twice(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    assert run("namespace", "create", "sales", wh=wh)[0] == 0
    assert run("namespace", "create", "sales.eu", wh=wh)[0] == 0
    code, _, err = run("namespace", "create", "sales", wh=wh)
    assert code == ExitCode.REFUSED and "already exists" in err
    code, out, _ = run("namespace", "list", "--json", wh=wh)
    assert [r["namespace"] for r in json.loads(out)["rows"]] == ["sales"]
    code, out, _ = run("namespace", "list", "sales", "--json", wh=wh)
    assert [r["namespace"] for r in json.loads(out)["rows"]] == ["sales.eu"]


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_plain_timestamp_warns_on_stderr_only(tmp_path: Path, json_flag: list[str]) -> None:
    # Spark SQL users mean timestamptz by TIMESTAMP; icectl keeps Iceberg's meaning, so it says so.
    wh = tmp_path / "wh"
    code, out, err = run("create", "db.t", "--schema", "id long, ts timestamp, s struct<inner: timestamp>",
                         *json_flag, wh=wh)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("icectl: warning:")
    assert "ts, inner" in lines[0] and "timestamptz" in lines[0] and "timestamp_ntz" in lines[0]
    assert "warning" not in out
    if json_flag:
        assert json.loads(out)["schema"][1] == "2: ts timestamp"  # stdout stays one JSON document
    # The explicit spellings are not warned about.
    for ddl in ("ts timestamptz", "ts timestamp_ntz", "ts timestamp without time zone", "timestamp long"):
        code, _, err = run("create", "db.u", "--schema", ddl, "--dry-run", wh=wh)
        assert code == 0 and err == "", (ddl, err)
    assert "timestamp_ntz" in run("create", "--help", wh=wh)[1]


def test_create_dry_run_writes_nothing(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    code, out, err = run("create", "db.t", "--schema", "id long", "--dry-run", "--json", wh=wh)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["location"] == str(wh / "db" / "t")
    assert not (wh / "db" / "t").exists()


def test_create_twice_is_refused(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    assert run("create", "db.t", "--schema", "id long", wh=wh)[0] == 0
    code, _, err = run("create", "db.t", "--schema", "id long", wh=wh)
    assert code == ExitCode.REFUSED and len(err.strip().splitlines()) == 1


def test_bad_ddl_names_the_token(tmp_path: Path) -> None:
    code, _, err = run("create", "db.t", "--schema", "id lnog, ts timestamptz", wh=tmp_path)
    assert code == ExitCode.USAGE and "'lnog'" in err and "character 4" in err
    code, _, err = run("create", "db.t", "--schema", "id long", "--partition-by", "bucket(16, nope)", wh=tmp_path)
    assert code == ExitCode.USAGE and "nope" in err
    code, _, err = run("create", "db.t", "--schema", "id long", "--format-version", "9", wh=tmp_path)
    assert code == ExitCode.USAGE and "9" in err


def test_create_like_parquet_and_list(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": pa.array([1], pa.int32()), "b": pa.array(["x"]),
                             "c": pa.array([[1.5]], pa.list_(pa.float64()))}), f)
    code, out, err = run("create", "db.like", "--like", str(f), "--json", wh=wh)
    assert code == 0, err
    assert json.loads(out)["schema"] == ["1: a int", "2: b string", "3: c list<double>"]
    code, out, _ = run("list", "db", "--json", wh=wh)
    assert [r["identifier"] for r in json.loads(out)["rows"]] == ["db.like"]
    code, _, err = run("create", "db.x", "--schema", "a int", "--like", str(f), wh=wh)
    assert code == ExitCode.USAGE and "exactly one" in err


def test_add_files_refuses_the_same_file_spelled_another_way(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    assert run("create", "db.t", "--schema", "a int", wh=wh)[0] == 0
    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": pa.array([1], pa.int32())}), f)
    assert run("add-files", "db.t", str(f), wh=wh)[0] == 0
    code, _, err = run("add-files", "db.t", f"file://{f}", wh=wh)  # /x and file:///x: one file
    assert code == ExitCode.REFUSED and "already in table" in err


def test_add_files_without_a_partition_source_column_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    assert run("create", "db.t", "--schema", "id long, part int", "--partition-by", "part", wh=wh)[0] == 0
    meta = wh / "db" / "t" / "metadata"
    before = sorted(p.name for p in meta.iterdir())
    f = tmp_path / "x.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), f)
    code, out, err = run("add-files", "db.t", str(f), wh=wh)
    assert code == ExitCode.USAGE, err
    assert out == "" and len(err.splitlines()) == 1
    assert "has no column part" in err and str(f) in err
    assert sorted(p.name for p in meta.iterdir()) == before
