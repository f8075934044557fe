"""Instant start (issue 15): the light commands import only what they use, and the lazy command
registry changes nothing a user sees.

Each light command runs in a fresh interpreter through a tiny wrapper that reports ``sys.modules``
afterwards; the assertions are on modules, not timings (timings: ``scripts/startup_time.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer.main
from typer import _click
from typer.core import TyperGroup
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.cli.docs.docgen import command_tree, walk
from icectl.cli.registry import COMMANDS, INSPECT_COMMANDS, LazyGroup, load_commands

ROOT = Path(__file__).resolve().parents[2]

WRAPPER = """
import json, os, sys
report, argv = sys.argv[1], json.loads(sys.argv[2])
if os.environ.get("STARTUP_TEST_TTY"):  # stderr a terminal, as for a person at the keyboard
    _, tty = os.openpty()
    os.dup2(tty, 2)
sys.argv = ["icectl", *argv]
code = 0
try:
    from icectl.cli.launch import main  # the console entry
    main()
except SystemExit as e:
    code = e.code or 0
with open(report, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""

# Never needed to print help, the version or a table's overview.
HEAVY = ("pyarrow", "fastavro", "pyroaring", "fsspec", "s3fs", "aiobotocore", "botocore", "boto3", "psycopg", "numpy",
         "pydantic", "sqlite3", "rich.table")
# `icectl --help` and `--version` need the root command alone.
ROOT_ONLY = {"icectl", "icectl.cli", "icectl.cli.launch", "icectl.replay", "icectl.cli.app", "icectl.cli.registry",
             "icectl.cli.state", "icectl.cli.coercion", "icectl.errors"}


def run_fresh(args: list[str], tmp_path: Path, **env: str) -> tuple[int, set[str], str]:
    """``icectl ARGS`` in a new interpreter: exit code, every module it imported, stdout (and
    stderr after it when the command exits with an error)."""
    report = tmp_path / "report.json"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ICECTL_")}
    run = subprocess.run([sys.executable, "-c", WRAPPER, str(report), json.dumps(args)], capture_output=True,
                         text=True, timeout=60, env={**environ, "PYTHONPATH": str(ROOT), **env})
    assert report.is_file(), run.stderr
    doc = json.loads(report.read_text())
    return doc["code"], set(doc["modules"]), run.stdout + (run.stderr if doc["code"] else "")


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.fixture(scope="module")
def small_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("startup")
    data = folder / "part-0.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]}), data)
    env = {"ICECTL_WAREHOUSE": str(folder / "wh"), "ICECTL_CONFIG": ""}
    for args in (["create", "db.t", "--schema", "id long, name string"], ["add-files", "db.t", str(data)]):
        r = CliRunner().invoke(app, args, env=env)
        assert r.exit_code == 0, r.output
    return folder / "wh" / "db" / "t"


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"], []])
def test_help_and_version_load_the_root_command_alone(args: list[str], tmp_path: Path) -> None:
    code, modules, out = run_fresh(args, tmp_path)
    assert code in (0, 2)  # no arguments: help, with click's usage exit code
    assert ("icectl 0." in out) if args == ["--version"] else ("Commands:" in out)
    assert loaded(modules, ("icectl",)) == sorted(ROOT_ONLY & modules), "only the root command is imported"
    assert not loaded(modules, (*HEAVY, "rich")), "nothing heavy for --help / --version"


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_inspect_table_loads_nothing_heavy(json_flag: list[str], small_table: Path, tmp_path: Path) -> None:
    code, modules, out = run_fresh(["inspect", "table", *json_flag, str(small_table)], tmp_path)
    assert code == 0, out
    if json_flag:
        doc = json.loads(out)
        assert doc["view"] == "table" and doc["snapshot_count"] == 1
        assert not loaded(modules, ("rich",)), "--json draws no view"
    else:
        assert f"Table {small_table}" in out
    assert not loaded(modules, HEAVY), "heavy modules loaded by inspect table"
    # Neither the manifest views nor the other commands, nor the SQL, REST and Glue clients.
    assert not loaded(modules, ("icectl.ops.inspect.views", "icectl.table.scan", "icectl.codec.avro",
                                "icectl.catalog.sql", "icectl.catalog.rest", "icectl.catalog.glue"))
    assert not loaded(modules, tuple(f"icectl.cli.{e.module}" for e in COMMANDS.values()
                                     if e.module != "commands.inspect"))


def test_a_given_config_path_needs_no_pydantic(small_table: Path, tmp_path: Path) -> None:
    config = tmp_path / "icectl.toml"
    config.write_text("")
    code, modules, out = run_fresh(["--config", str(config), "inspect", "table", "--json", str(small_table)], tmp_path)
    assert code == 0 and json.loads(out)["view"] == "table"
    assert not loaded(modules, ("pydantic",))


def test_a_manifest_view_still_works(small_table: Path, tmp_path: Path) -> None:
    code, modules, out = run_fresh(["inspect", "files", "--json", str(small_table)], tmp_path)
    assert code == 0
    assert [r["record_count"] for r in json.loads(out)["rows"]] == [3]
    assert "icectl.cli.commands.inspect_manifests" in modules


# --------------------------------------------------------------------------- the registry


def _help(command: _click.Command, name: str, width: int) -> str:
    ctx = _click.Context(command, info_name=name, terminal_width=width, max_content_width=width,
                         help_option_names=["-h", "--help"])
    return command.get_help(ctx)


def _eager_copy(group: LazyGroup) -> TyperGroup:
    """The same group as typer would build it with every command registered up front."""
    return TyperGroup(name=group.name, commands={n: group.commands[n] for n in group.index}, params=group.params,
                      help=group.help, epilog=group.epilog, short_help=group.short_help,
                      options_metavar=group.options_metavar, no_args_is_help=group.no_args_is_help,
                      rich_markup_mode=None)


def _groups() -> list[tuple[str, LazyGroup]]:
    root = typer.main.get_command(app)
    assert isinstance(root, LazyGroup)
    inspect_group = root.commands["inspect"]
    assert isinstance(inspect_group, LazyGroup)
    return [("icectl", root), ("inspect", inspect_group)]


@pytest.mark.parametrize("width", [50, 80, 120])
def test_help_lists_what_the_full_app_would(width: int) -> None:
    for name, group in _groups():
        lazy = _help(group, name, width)
        assert lazy == _help(_eager_copy(group), name, width)
        for command in group.index:
            assert f"\n  {command} " in lazy


def test_the_registry_says_what_the_modules_define() -> None:
    for index in (COMMANDS, INSPECT_COMMANDS):
        for name, entry in index.items():
            built = load_commands(entry)
            extra = sorted(set(built) - set(index))
            assert not extra, f"icectl.cli.{entry.module}.{entry.register} defines {extra}: add them to the registry"
            assert name in built, f"icectl.cli.{entry.module}.{entry.register} does not define '{name}'"
            first_paragraph = (built[name].help or "").split("\n\n")[0]
            assert " ".join(first_paragraph.split()) == entry.help, f"help of '{name}' differs from the registry"


def test_listing_the_commands_imports_none(tmp_path: Path) -> None:
    probe = ("import sys, typer.main\n"
             "from icectl.cli.app import app\n"
             "root = typer.main.get_command(app)\n"
             "names = root.list_commands(None)\n"
             "assert names == list(root.commands) and 'inspect' in names, names\n"
             "assert not [m for m in sys.modules if m.startswith('icectl.cli.commands.')]\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr


def test_the_root_group_takes_no_commands_of_its_own() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, LazyGroup)
    with pytest.raises(TypeError, match="registry"):
        root.add_command(_click.Command.__new__(TyperGroup), "x")


def test_every_command_shows_its_help() -> None:
    for doc in walk(command_tree(app)):
        r = CliRunner().invoke(app, [*doc.path, "--help"])
        assert r.exit_code == 0, (doc.path, r.output)
        assert r.stdout.startswith("Usage: icectl " + " ".join([*doc.path, ""]).rstrip()), doc.path


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"ICECTL_CONFIG": ""})


def test_a_mistyped_command_gets_a_suggestion() -> None:
    r = _invoke("inspec")
    assert r.exit_code == 2 and "Did you mean 'inspect'?" in r.stderr


def test_values_are_still_converted_and_checked(small_table: Path, tmp_path: Path) -> None:
    r = _invoke("inspect", "schema", "--schema-id", "abc", str(small_table))
    assert r.exit_code == 2 and "--schema-id" in r.stderr
    r = _invoke("inspect", "files", "--content", "bogus", str(small_table))
    assert r.exit_code == 2 and "--content" in r.stderr
    r = _invoke("--config", str(tmp_path / "missing.toml"), "inspect", "table", str(small_table))
    assert r.exit_code == 3 and "missing.toml" in r.stderr
    r = _invoke("inspect", "schema", "--schema-id", "0", "--json", str(small_table))
    assert r.exit_code == 0 and [row["name"] for row in json.loads(r.stdout)["rows"]] == ["id", "name"]


@pytest.mark.parametrize("flag, enabled", [(["--no-cache"], False), ([], True)])
def test_no_cache_turns_the_manifest_cache_off(flag: list[str], enabled: bool, tmp_path: Path) -> None:
    code, _, out = run_fresh([*flag, "cache", "info", "--json"], tmp_path, ICECTL_CACHE_DIR=str(tmp_path / "cache"))
    assert code == 0, out
    doc = json.loads(out)
    assert doc["enabled"] is enabled and doc["dir"] == str(tmp_path / "cache")


def test_a_terminal_loads_no_progress_bars_until_there_is_progress(small_table: Path, tmp_path: Path) -> None:
    code, modules, out = run_fresh(["inspect", "table", str(small_table)], tmp_path, STARTUP_TEST_TTY="1")
    assert code == 0 and f"Table {small_table}" in out
    assert not loaded(modules, ("rich.progress",)), "rich.progress (25 ms) loaded with nothing to show"
    # ... and still shows them where there is: validate reports "checking snapshots".
    code, modules, out = run_fresh(["validate", str(small_table)], tmp_path, STARTUP_TEST_TTY="1")
    assert code == 0, out
    assert loaded(modules, ("rich.progress",))
