"""icectl.cli.docs.examples: every command has examples, every example parses against the real app, the
runnable ones run on a table of their own, and the man pages show them (``man -l``)."""

from __future__ import annotations

import datetime
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer.main
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.cli.docs.docgen import command_tree, man_page, walk
from icectl.cli.docs.examples import EXAMPLES

ALL = [(path, what, line) for path, items in EXAMPLES.items() for what, line in items]


def _commands() -> dict[str, Any]:
    """Every command of the real app by path ("inspect files"), groups included."""
    out: dict[str, Any] = {}

    def add(cmd: Any, path: list[str]) -> None:
        out[" ".join(path)] = cmd
        for name in getattr(cmd, "commands", {}) or {}:
            add(cmd.commands[name], [*path, name])

    add(typer.main.get_command(app), [])
    return out


def test_every_command_has_examples_and_every_example_names_a_command() -> None:
    commands = _commands()
    leaves = {p for p, c in commands.items() if not hasattr(c, "commands")}
    assert not leaves - set(EXAMPLES), f"commands without examples: {sorted(leaves - set(EXAMPLES))}"
    assert not set(EXAMPLES) - set(commands), f"examples of no command: {sorted(set(EXAMPLES) - set(commands))}"
    for path, what, line in ALL:
        assert what and not what.endswith("."), (path, what)
        assert shlex.split(line)[0] == "icectl"


def test_every_option_and_argument_is_described() -> None:
    missing = [f"{path or 'icectl'} {p.name}" for path, cmd in _commands().items() for p in cmd.params
               if not getattr(p, "hidden", False) and not " ".join((getattr(p, "help", None) or "").split())]
    assert not missing, f"without help: {missing}"


@pytest.mark.parametrize(("path", "what", "line"), ALL, ids=[f"{p or 'icectl'}: {w}" for p, w, _ in ALL])
def test_example_parses(path: str, what: str, line: str) -> None:
    """click parses the line as the command of its section, with every value converted (nothing runs)."""
    args = shlex.split(line)[1:]
    cmd: Any = typer.main.get_command(app)
    ctx = cmd.make_context("icectl", list(args))
    names: list[str] = []
    while hasattr(cmd, "commands"):
        rest = [*(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None) or []), *ctx.args]
        if not rest:
            break
        name, cmd, rest = cmd.resolve_command(ctx, rest)
        names.append(name)
        ctx = cmd.make_context(name, list(rest), parent=ctx)
    # an example of a group may run any of its commands; a command's examples run that command
    assert " ".join(names[:len(path.split())]) == path or not path


# The examples that run as they are on the table the first of them creates (ids, remote paths and
# data folders in the others are the reader's own).
RUNNABLE = [
    "icectl namespace create db --exist-ok",
    'icectl create db.events --schema "id long not null, ts timestamptz, name string" '
    '--partition-by "days(ts), bucket(16, id)" --sort-by "id desc" --format-version 3',
    "icectl inspect table db.events",
    "icectl inspect snapshots warehouse/db/events --json",
    "icectl inspect files db.events --content data",
    "icectl validate db.events",
    "icectl validate db.events --all-snapshots --deep --verbose",
    "icectl expire-snapshots db.events --dry-run",
    "icectl compact db.events --dry-run",
    "icectl properties set db.events history.expire.max-snapshot-age-ms=172800000",
    "icectl branch create db.events audit --retain-last 10 --max-ref-age 30d",
    "icectl tag create db.events eoy-2024 --max-ref-age 365d",
    "icectl inspect files db.events --ref audit --json",
    "icectl list --all",
    "icectl remove-orphan-files db.events --dry-run",
]


def test_runnable_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = {line for _p, _w, line in ALL}
    assert not set(RUNNABLE) - lines, "RUNNABLE lists a line that is no example"
    monkeypatch.chdir(tmp_path)  # "warehouse/db/events": the default warehouse is ./warehouse
    env = {"ICECTL_CONFIG": "", "ICECTL_WAREHOUSE": str(tmp_path / "warehouse")}

    def run(args: list[str]) -> str:
        r = CliRunner().invoke(app, args, env=env)
        assert r.exit_code == 0, (args, r.stdout, r.stderr)
        return r.stdout

    for i, line in enumerate(RUNNABLE):
        out = run(shlex.split(line)[1:])
        if line.startswith("icectl create"):  # two appends to inspect, validate and expire
            for day in (1, 2):
                f = tmp_path / f"d{day}.parquet"
                ts = datetime.datetime(2024, 3, day, tzinfo=datetime.timezone.utc)
                pq.write_table(pa.table({"id": pa.array([day], pa.int64()),
                                         "ts": pa.array([ts], pa.timestamp("us", tz="UTC")),
                                         "name": pa.array([f"n{day}"])},
                                        schema=pa.schema([pa.field("id", pa.int64(), nullable=False),
                                                          pa.field("ts", pa.timestamp("us", tz="UTC")),
                                                          pa.field("name", pa.string())])), f)
                run(["add-files", "db.events", str(f)])
        if "inspect snapshots" in line:
            assert len(__import__("json").loads(out)["rows"]) == 2, (i, out)


def test_man_pages_show_the_examples(tmp_path: Path) -> None:
    man = shutil.which("man")
    if man is None:
        pytest.skip("man is not installed (.ci/run installs it)")
    doc = next(d for d in walk(command_tree(app)) if d.path == ["create"])
    page = tmp_path / "icectl-create.1"
    page.write_text(man_page(doc))
    out = subprocess.run([man, "-l", str(page)], capture_output=True, text=True, check=True,
                         env={**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "250",
                              "LANG": "C.UTF-8"}).stdout
    out = out.replace("\u2010", "-").replace("\u2212", "-")  # a hyphen groff may still draw
    assert "EXAMPLES" in out and "EXIT STATUS" in out
    for what, line in EXAMPLES["create"]:
        assert what + ":" in " ".join(out.split())
        assert line in out, line  # on one line, quotes and options as typed


def test_help_ends_with_the_examples() -> None:
    for path in (["expire-snapshots"], ["inspect", "files"], ["branch", "create"]):
        out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).stdout
        tail = out[out.index("Examples:"):]
        for what, line in EXAMPLES[" ".join(path)]:
            assert f"  {what}:\n    {line}\n" in tail, (path, tail)
