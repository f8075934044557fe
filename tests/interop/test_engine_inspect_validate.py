"""``inspect files|entries|partitions`` and ``validate`` on the Spark engine (issue 17) equal the local engine's.

The Spark engine decodes each distinct manifest in a Spark task (``local[2]``, Python workers that
import icectl from the shipped zip) and builds the rows there with the local path's own functions;
the JSON text must be byte for byte the local engine's and validate's findings (rule ids, paths,
messages, order) and exit code the same, on every Spark fixture, a damaged clone and a missing
manifest. Each comparison also checks that Spark tasks ran (``engine.report().spark_tasks`` grows).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support.corrupt import (
    copy_table,
    current_list,
    current_manifests,
    edit_entry,
    edit_manifest_list,
    entry_records,
)
from support.fixtures import FIXTURE_KINDS
from typer.testing import CliRunner
from unit.validate.breaking import destroy_magic

from icectl.cli.app import app
from icectl.cli.output.render import render
from icectl.engine import using
from icectl.errors import IcectlError
from icectl.ops.inspect import distributed as inspect_engine
from icectl.ops.inspect import files as inspect_files
from icectl.ops.inspect.views import ContentFilter, entry_rows, file_rows, partition_rows
from icectl.results import RowsResult
from icectl.spec.manifest import ManifestContent
from icectl.table import Table, load_table
from icectl.table.manifest_cache import set_cache_enabled
from icectl.validate import manifest_list_rules, manifest_rules, validate_table

_T = TypeVar("_T")


def rendered(result: RowsResult) -> str:
    out = io.StringIO()
    render(result, as_json=True, out=out)
    return out.getvalue()


def views(table: Table) -> list[str]:
    """The engine-run views of ``table``'s current snapshot as the CLI's JSON: files with metrics and
    entries as bulk JSON text, partitions (partial sums merged)."""
    return [rendered(file_rows(table, metrics=True)), rendered(entry_rows(table)), rendered(partition_rows(table))]


def row_views(table: Table) -> str:
    """The rows themselves (not the JSON text path), as a caller of the library gets them."""
    return json.dumps([list(file_rows(table, content=ContentFilter.DELETES).rows),
                       list(entry_rows(table, metrics=True).rows)], default=repr)


def tasks(engine: Any) -> int:
    return engine.report().spark_tasks or 0


def on_both(engine: Any, run: Callable[[], _T]) -> _T:
    """``run()`` on the local engine, then on ``engine``: equal, and the engine ran tasks."""
    local = run()
    before = tasks(engine)
    with using(engine):
        remote = run()
    assert remote == local
    assert tasks(engine) > before
    return local


def spy(monkeypatch: pytest.MonkeyPatch, *targets: tuple[Any, str]) -> list[str]:
    """The names of ``targets`` (module, function) as they are called in this process: not by the
    tasks, which run in Spark's Python workers, out of this patch's reach."""
    called: list[str] = []
    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            called.append(name)
            return real(*args, **kwargs)
        return call

    for module, name in targets:
        monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    return called


@pytest.mark.parametrize("kind", FIXTURE_KINDS)
def test_inspect_views_equal_the_local_engines(spark_tables: Any, spark_engine: Any, kind: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_table(str(spark_tables[kind].location))
    here = spy(monkeypatch, (inspect_engine, "iter_entries"), (inspect_files, "iter_manifest_tables"))
    local = views(table)
    assert "iter_manifest_tables" in here  # the local engine's JSON text comes through it
    here.clear()
    before = tasks(spark_engine)
    with using(spark_engine):
        assert views(table) == local
    assert tasks(spark_engine) > before and here == []  # the manifests were decoded by the tasks alone
    assert '"file_path"' in local[0] and '"manifest_path"' in local[1] and '"record_count"' in local[2]


def test_rows_and_a_manifest_listed_twice_equal_the_local_engines(spark_tables: Any, spark_engine: Any,
                                                                  tmp_path: Path) -> None:
    table_dir = copy_table(spark_tables["v3_dv"].location, tmp_path / "t")
    edit_manifest_list(current_list(table_dir), lambda records: records.extend([records[-1], records[0]]))
    table = load_table(str(table_dir))
    doubled = on_both(spark_engine, lambda: row_views(table))
    path = current_manifests(table_dir)[0].manifest_path
    assert doubled.count(json.dumps(path)) == 2 * len(entry_records(path))
    docs = cli_docs(["inspect", "entries", str(table_dir), "--json"], 0)
    assert docs["spark"]["rows"] == docs["local"]["rows"] and docs["spark"] == docs["local"]


def cli_docs(args: list[str], exit_code: int) -> dict[str, Any]:
    """``icectl <args> --engine local|spark`` in-process (--engine spark joins this session): the JSON
    documents without their "engine" key, which says which ran (and the Spark tasks)."""
    runs = {engine: CliRunner().invoke(app, [*args, "--engine", engine]) for engine in ("local", "spark")}
    assert {engine: run.exit_code for engine, run in runs.items()} == {"local": exit_code, "spark": exit_code}
    docs = {engine: json.loads(run.stdout) for engine, run in runs.items()}
    assert docs["spark"].pop("engine")["spark_tasks"] > 0 and docs["local"].pop("engine") == {"name": "local"}
    return docs


# --------------------------------------------------------------------------- validate


def validated(table_dir: Path | str, *, all_snapshots: bool = True, deep: bool = False) -> tuple[str, int]:
    """validate's JSON document (findings in the CLI's order, counts, by_rule) and its exit code."""
    result = validate_table(load_table(str(table_dir)), all_snapshots=all_snapshots, deep=deep)
    return rendered(result.to_result()), result.exit_code


def both_engines(engine: Any, table_dir: Path | str, **kw: Any) -> tuple[str, int]:
    return on_both(engine, lambda: validated(table_dir, **kw))


def test_validate_findings_equal_the_local_engines_on_every_fixture(spark_tables: Any, spark_engine: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    here = spy(monkeypatch, (manifest_list_rules, "check_manifest_file"), (manifest_rules, "check_manifest"))
    for kind in FIXTURE_KINDS:  # the current snapshot (every snapshot: the damaged table's test)
        here.clear()
        local = validated(spark_tables[kind].location, all_snapshots=False)
        assert local[1] == 0 and json.loads(local[0])["manifests"] > 0 and "check_manifest" in here
        here.clear()
        before = tasks(spark_engine)
        with using(spark_engine):
            assert validated(spark_tables[kind].location, all_snapshots=False) == local
        assert tasks(spark_engine) > before
        assert here == []  # every manifest and its list row were checked by the tasks
    both_engines(spark_engine, spark_tables["v3_dv"].location, deep=True)  # --deep: live files from the tasks


def _damage(table: Path) -> set[str]:
    """Break four manifests of the current snapshot four ways; the rules that must fire."""
    manifests = [m for m in current_manifests(table) if m.content == ManifestContent.DATA]
    assert len(manifests) >= 3, manifests
    edit_entry(table, manifests[0].manifest_path, 0, lambda r: r["data_file"].update(record_count=-5))
    destroy_magic(manifests[1].manifest_path)
    Path(manifests[2].manifest_path).unlink()
    untouched = {m.manifest_path for m in manifests[:3]}

    def more_files(records: list[dict[str, Any]]) -> None:
        row = next(r for r in records if r["manifest_path"] not in untouched)
        row["added_files_count"] += 7

    edit_manifest_list(current_list(table), more_files)
    return {"manifest.entry-values", "manifest.readable", "manifest-list.manifest-exists", "manifest-list.counts"}


@pytest.fixture
def outcome_cache_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Outcomes of the fixtures' small, fresh manifests kept too (the key is made on the driver).
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")


def test_validate_on_a_damaged_table_equals_the_local_engine_cold_warm_and_uncached(
        spark_tables: Any, spark_engine: Any, tmp_path: Path, outcome_cache_env: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    expected = _damage(table)
    here = spy(monkeypatch, (manifest_list_rules, "check_manifest_file"), (manifest_rules, "check_manifest"))
    with using(spark_engine):
        cold = validated(table)  # every snapshot: the tasks check (and store the outcomes of) every manifest
    assert here == []
    local = validated(table)  # the driver replays what the tasks stored, or checks
    doc = json.loads(local[0])
    assert expected <= {r["rule"] for r in doc["rows"]}, doc["rows"]
    assert local[1] == 7
    assert cold == local
    both_engines(spark_engine, table)  # warm: the tasks replay stored outcomes
    set_cache_enabled(False)
    try:
        assert both_engines(spark_engine, table) == local
    finally:
        set_cache_enabled(True)
    # The command line, in-process: --engine spark joins this session; the JSON says which engine ran.
    docs = cli_docs(["validate", str(table), "--json"], 7)
    assert docs["spark"] == docs["local"]
    assert expected <= {r["rule"] for r in docs["local"]["rows"]}


def test_a_missing_or_damaged_manifest_fails_inspect_alike_on_both_engines(spark_tables: Any, spark_engine: Any,
                                                                           tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    first = current_manifests(table)[0].manifest_path
    for damage in (destroy_magic, lambda p: Path(p).unlink()):
        damage(first)
        errors = []
        for engine in (None, spark_engine):
            with using(engine) if engine is not None else contextlib.nullcontext():
                for view in (lambda t: rendered(file_rows(t)), partition_rows):
                    with pytest.raises(IcectlError) as got:
                        view(load_table(str(table)))
                    errors.append((type(got.value), got.value.message, got.value.path, got.value.exit_code))
        assert errors[:2] == errors[2:]
        assert first in repr(errors[0])
