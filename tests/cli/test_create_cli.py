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
    # A format version given as a table property: a usage error naming it, never a traceback.
    code, _, err = run("create", "db.t", "--schema", "id long", "--property", "format-version=x", wh=tmp_path)
    assert code == ExitCode.USAGE and "format-version='x'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "db" / "t").exists()


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


WALKS = [["expire-snapshots", "--all"], ["compact", "--all"], ["list"], ["list", "--all"], ["list", "db"],
         ["namespace", "list"]]


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
@pytest.mark.parametrize("args", WALKS, ids=" ".join)
def test_missing_warehouse_is_not_found(tmp_path: Path, args: list[str], json_flag: list[str]) -> None:
    # A cron job pointed at a wrong warehouse must fail, not report "0 table(s)".
    wh = tmp_path / "no-such-warehouse"
    code, out, err = run(*args, *json_flag, wh=wh)
    assert code == ExitCode.NOT_FOUND, (code, out, err)
    assert out == "" and len(err.strip().splitlines()) == 1 and str(wh) in err
    assert not wh.exists()


@pytest.mark.parametrize("args", WALKS, ids=" ".join)
def test_missing_sqlite_catalog_is_not_found(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "nope" / "catalog.db"
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'default-catalog = "prod"\n[catalog.prod]\ntype = "sql"\nuri = "{db}"\n'
                   f'warehouse = "{tmp_path}"\n')
    r = CliRunner().invoke(app, ["--config", str(cfg), *args, "--json"])
    assert r.exit_code == ExitCode.NOT_FOUND, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and str(db) in r.stderr
    assert not db.exists()  # reading did not create an empty catalog


def test_readme_set_up_line_on_a_fresh_machine_and_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `icectl namespace create db --exist-ok && icectl expire-snapshots --all` in a fresh folder.
    monkeypatch.chdir(tmp_path)
    env = {"ICECTL_WAREHOUSE": None, "ICECTL_CONFIG": None}
    for _ in range(2):
        r = CliRunner().invoke(app, ["namespace", "create", "db", "--exist-ok"], env=env)
        assert r.exit_code == 0, r.stderr
        r = CliRunner().invoke(app, ["expire-snapshots", "--all"], env=env)
        assert r.exit_code == 0, r.stderr
        assert "0 table(s)" in r.stdout
    assert (tmp_path / "warehouse" / "db").is_dir()
    r = CliRunner().invoke(app, ["namespace", "create", "db"], env=env)
    assert r.exit_code == ExitCode.REFUSED and "--exist-ok" in r.stderr
