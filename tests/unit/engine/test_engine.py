"""The engine layer without Spark: settings, the local engine's ordering and errors, errors across
processes, the shipped zip, and the CLI's engine options and JSON key (issue 17)."""

from __future__ import annotations

import json
import pickle
import random
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.cli.framework import spark_suggestion
from icectl.config import parse_config
from icectl.engine import (
    SPARK_SUGGESTED_MANIFESTS,
    Engine,
    EngineSettings,
    LocalEngine,
    active,
    pack_error,
    parse_spark_conf,
    unpack_error,
    using,
)
from icectl.engine.shipping import package_zip
from icectl.errors import CommitConflictError, CorruptInputError, IcectlError, NotFoundError, UsageError
from icectl.storage import FileIO, S3Settings
from icectl.table import load_table
from unit.ops.lifecycle.test_upgrade import icectl, parquet


def test_spark_conf_pairs_keep_order_and_the_last_value() -> None:
    assert parse_spark_conf(["a=1", "b=x=y", "a=2"]) == (("a", "2"), ("b", "x=y"))
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_spark_conf(["spark.executor.memory"])
    with pytest.raises(UsageError):
        EngineSettings(name="dask").check()


def test_engine_config_section() -> None:
    cfg = parse_config({"engine": {"default": "spark", "master": "spark://h:7077", "executor-deletes": True,
                                   "conf": {"spark": {"executor": {"memory": "4g"}}, "spark.eventLog.enabled": True}}})
    assert cfg.engine.default == "spark" and cfg.engine.master == "spark://h:7077" and cfg.engine.executor_deletes
    # TOML reads a bare dotted key as nested tables: flattened back to Spark's key, booleans as Spark writes them
    assert cfg.engine.conf == {"spark.executor.memory": "4g", "spark.eventLog.enabled": "true"}
    assert parse_config({}).engine.default == "local"
    for bad in ({"default": "dask"}, {"mastr": "x"}, {"conf": "x"}, {"executor-deletes": "yes"}):
        with pytest.raises(CorruptInputError):
            parse_config({"engine": bad})


def _slow_square(shared: int, item: int) -> int:
    time.sleep(random.random() / 200)  # finish out of order
    if item == shared:
        raise NotFoundError(f"item {item}", path=f"/x/{item}")
    return item * item


def test_local_engine_yields_in_order_and_raises_at_the_failing_item() -> None:
    engine = LocalEngine(workers=8)
    items = list(range(200))
    assert list(engine.map(_slow_square, items, shared=-1, description="t")) == [i * i for i in items]
    got: list[int] = []
    with pytest.raises(NotFoundError, match="item 57"):
        for r in engine.map(_slow_square, items, shared=57, description="t"):
            got.append(r)
    assert got == [i * i for i in range(57)]
    assert list(engine.map(_slow_square, [], shared=0, description="t")) == []


def test_the_active_engine_is_local_unless_set() -> None:
    assert active().name == "local"
    other = LocalEngine(workers=1)
    with using(other):
        assert active() is other
    assert active().name == "local" and active() is not other


@pytest.mark.parametrize("error", [
    CorruptInputError("bad manifest", path="/t/m.avro", hint="run validate"),
    CommitConflictError("lost the race"),
    NotFoundError("gone"),
])
def test_an_executor_error_comes_back_as_itself(error: IcectlError) -> None:
    back = unpack_error(pack_error(error))
    assert type(back) is type(error)
    assert back.one_line() == error.one_line() and back.exit_code == error.exit_code


def test_fileio_travels_with_its_settings_not_its_clients(tmp_path: Path) -> None:
    io = FileIO(s3=S3Settings(endpoint="http://127.0.0.1:1", access_key_id="k", secret_access_key="s"))
    (tmp_path / "f").write_bytes(b"abc")
    io.read(str(tmp_path / "f"))
    io.filesystem(str(tmp_path / "f"))  # an open client, which must not be pickled
    back = pickle.loads(pickle.dumps(io))
    assert back.s3 == io.s3 and back._filesystems == {}
    assert back.read(str(tmp_path / "f")) == b"abc"


def test_the_shipped_zip_holds_the_package_and_is_reused(tmp_path: Path) -> None:
    path = package_zip(str(tmp_path))
    assert package_zip(str(tmp_path)) == path
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
    assert {"icectl/__init__.py", "icectl/engine/spark.py", "icectl/ops/expire/__init__.py"} <= names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


@pytest.fixture
def table(tmp_path: Path) -> str:
    r = CliRunner().invoke(app, ["create", str(tmp_path / "t"), "--schema", "id long"])
    assert r.exit_code == 0, r.output
    return str(tmp_path / "t")


@pytest.mark.parametrize("args", [["--spark-master", "local[1]"], ["--spark-conf", "a=b"], ["--executor-deletes"]])
def test_spark_options_without_the_spark_engine_are_usage_errors(table: str, args: list[str]) -> None:
    r = CliRunner().invoke(app, ["expire-snapshots", table, "--dry-run", *args])
    assert r.exit_code == 2 and "needs --engine spark" in r.stderr


def test_an_unknown_engine_is_a_usage_error(table: str) -> None:
    r = CliRunner().invoke(app, ["validate", table, "--engine", "dask"])
    assert r.exit_code == 2 and "unknown engine 'dask'" in r.stderr


def test_json_says_which_engine_ran(table: str) -> None:
    r = CliRunner().invoke(app, ["expire-snapshots", table, "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["engine"] == {"name": "local"}
    r = CliRunner().invoke(app, ["inspect", "files", table, "--json"])
    doc = json.loads(r.stdout)
    assert list(doc)[-2:] == ["rows", "engine"] and doc["engine"] == {"name": "local"}
    r = CliRunner().invoke(app, ["inspect", "snapshots", table, "--json"])  # no engine option: no key
    assert "engine" not in json.loads(r.stdout)


def test_a_big_local_run_suggests_the_spark_engine() -> None:
    assert spark_suggestion(SPARK_SUGGESTED_MANIFESTS - 1, "local") is None
    assert spark_suggestion(SPARK_SUGGESTED_MANIFESTS, "spark") is None
    line = spark_suggestion(SPARK_SUGGESTED_MANIFESTS, "local")
    assert line is not None and "--engine spark" in line and str(SPARK_SUGGESTED_MANIFESTS) in line


def test_an_abandoned_stream_closes_without_waiting_for_its_threads() -> None:
    """A stream the consumer leaves is closed without joining its threads (icectl.threads): the garbage
    collector may close it while threading holds its shutdown lock, where a join deadlocks."""
    release = threading.Event()

    def blocked(_shared: None, item: int) -> int:
        if item > 0:
            release.wait(30)
        return item

    stream = LocalEngine(workers=2).map(blocked, list(range(5)), shared=None, description="t")
    assert next(stream) == 0
    closer = threading.Thread(target=stream.close)
    closer.start()
    closer.join(10)
    try:
        assert not closer.is_alive(), "closing the stream waited for reads nobody will take"
    finally:
        release.set()


ENGINE_COMMANDS = [  # (argv after the table, the module the command calls through, the operation's name there)
    (["expire-snapshots"], "icectl.cli.commands.maintenance", "expire_snapshots"),
    (["compact"], "icectl.cli.commands.maintenance", "compact"),
    (["remove-orphan-files"], "icectl.cli.commands.orphans", "remove_orphan_files"),
    (["validate"], "icectl.cli.commands.validate", "validate_address"),
    (["inspect", "files"], "icectl.ops.inspect.views", "file_rows"),
    (["inspect", "entries"], "icectl.ops.inspect.views", "entry_rows"),
    (["inspect", "partitions"], "icectl.ops.inspect.views", "partition_rows"),
]


class _ElsewhereEngine(LocalEngine):
    """An engine the framework opened that is not the default one (as --engine spark gives)."""

    runs_in_process = False


@pytest.mark.parametrize(("argv", "module", "op"), ENGINE_COMMANDS, ids=[" ".join(c[0]) for c in ENGINE_COMMANDS])
def test_the_command_framework_passes_the_runs_engine_to_the_operation(
        table: str, monkeypatch: pytest.MonkeyPatch, argv: list[str], module: str, op: str) -> None:
    """command(..., engine=True) hands the engine it opened to the operation's ``engine`` argument (issue 28),
    and keeps it the context value for library code that reads engine.active()."""
    import importlib

    import icectl.engine

    opened = _ElsewhereEngine(workers=1)
    monkeypatch.setattr(icectl.engine, "open_engine", lambda settings: opened)
    seen: dict[str, Any] = {}

    def operation(*args: Any, **kw: Any) -> Any:
        seen.update(engine=kw.get("engine"), active=active())
        raise UsageError("stop here")

    monkeypatch.setattr(importlib.import_module(module), op, operation)
    r = CliRunner().invoke(app, [*argv, table])
    assert r.exit_code == 2 and "stop here" in r.stderr, r.output
    assert seen["engine"] is opened, f"{' '.join(argv)} did not pass the engine: {seen}"
    assert seen["active"] is opened


def test_an_engine_that_ships_its_items_takes_the_engine_path_whatever_its_class(tmp_path: Path) -> None:
    """Operations ask Engine.runs_in_process, not the engine's class: a LocalEngine subclass that says it
    runs elsewhere gets the items as tasks (inspect partitions' per-manifest sums)."""
    from icectl.ops.inspect import views

    calls: list[str] = []

    class Recording(_ElsewhereEngine):
        def map(self, fn: Any, items: Any, *, shared: Any, description: str, range_keys: Any = None) -> Any:
            calls.append(description)
            return super().map(fn, items, shared=shared, description=description, range_keys=range_keys)

    assert LocalEngine().runs_in_process and not Recording().runs_in_process and not Engine.runs_in_process
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)")
    for day in (1, 2):
        icectl("add-files", str(d), parquet(tmp_path / f"{day}.parquet", range(day * 10, day * 10 + 3), day))
    table = load_table(str(d))
    local = views.partition_rows(table, engine=LocalEngine())
    shipped = views.partition_rows(table, engine=Recording(workers=2))
    assert calls, "the engine was not asked to run the manifests"
    assert list(shipped.rows) == list(local.rows) and len(list(local.rows)) == 2
