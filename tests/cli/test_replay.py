"""Replayed views (icectl.replay): a warm ``inspect files|entries|manifests|partitions --json`` of an
unchanged table prints the bytes an uncached run prints, without importing the app, and any change
to a file the recorded run read (or to the config, the command line, the environment) is a miss.

Every run is a real ``python -m icectl`` process on a copy of a Spark-written table. Whether a run
was replayed is read from ``-X importtime``: a replay imports neither typer nor pyarrow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.relocate import copy_table_dir
from unit.table.test_cache_read_paths import bigger_file, current_manifests, replace_manifest

from icectl import replay

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ICECTL_")}
    environ.update(ICECTL_CACHE_DIR=str(tmp_path / "cache"), ICECTL_CACHE_RACY_SECONDS="0",
                   HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    return environ


@pytest.fixture
def table(spark_tables, tmp_path: Path) -> Path:
    return copy_table_dir(Path(spark_tables["v2_part"].location), tmp_path / "wh" / "db" / "v2_part")


def icectl(env: dict[str, str], *args: str, cwd: Path | None = None) -> tuple[bytes, bool]:
    """stdout of ``icectl ARGS`` and whether the run was a replay (it imported no pyarrow)."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "icectl", *args], env=env, cwd=cwd or ROOT,
                       capture_output=True, timeout=300)
    imports = [line.rsplit("|", 1)[-1].strip() for line in p.stderr.decode().splitlines() if "import time:" in line]
    said = [line for line in p.stderr.decode().splitlines() if "import time:" not in line]
    assert p.returncode == 0 and not said, (p.returncode, said)
    return p.stdout, "pyarrow" not in imports and "typer" not in imports


def truth(env: dict[str, str], *args: str) -> bytes:
    out, replayed = icectl({**env, "ICECTL_CACHE": "off"}, *args)
    assert not replayed
    return out


def views(env: dict[str, str]) -> list[Path]:
    return [p for p, _, _ in replay.entries(Path(env["ICECTL_CACHE_DIR"]) / replay.FOLDER)]


@pytest.mark.parametrize("view", ["files", "entries", "manifests", "partitions"])
def test_a_warm_view_replays_the_bytes_of_an_uncached_run(env: dict[str, str], table: Path, view: str) -> None:
    args = ("inspect", view, str(table), "--json")
    expected = truth(env, *args)
    first, replayed = icectl(env, *args)
    assert (first, replayed) == (expected, False)
    assert len(views(env)) == 1
    assert icectl(env, *args) == (expected, True)
    assert icectl(env, "inspect", view, str(table), "--format", "json") == (expected, False)  # another key
    assert icectl(env, "inspect", view, str(table), "--format", "json") == (expected, True)


def test_a_manifest_rewritten_in_place_is_a_miss(env: dict[str, str], table: Path) -> None:
    args = ("inspect", "files", str(table), "--json", "--metrics")
    icectl(env, *args)
    assert icectl(env, *args)[1]
    biggest = max(current_manifests(table), key=lambda m: m.manifest_length)
    first = replace_manifest(table, biggest, bigger_file, codec="null")
    expected = truth(env, *args)
    assert icectl(env, *args) == (expected, False)
    assert icectl(env, *args) == (expected, True)
    second = replace_manifest(table, biggest, bigger_file, codec="null")  # same length, other content
    assert len(second) == len(first) and second != first
    changed = truth(env, *args)
    assert changed != expected
    assert icectl(env, *args) == (changed, False)


def test_a_new_table_version_a_repointed_link_and_a_config_file_are_misses(
        env: dict[str, str], table: Path, spark_tables, tmp_path: Path) -> None:
    other = copy_table_dir(Path(spark_tables["v3_dv"].location), tmp_path / "wh" / "db" / "v3_dv")
    link = tmp_path / "current"
    link.symlink_to(table)
    args = ("inspect", "files", str(link), "--json")
    icectl(env, *args)
    assert icectl(env, *args)[1]

    link.unlink()
    link.symlink_to(other)  # the same address now names another table
    assert icectl(env, *args) == (truth(env, *args), False)
    assert icectl(env, *args)[1]

    props = ("properties", "set", str(other), "replay.test=1")
    subprocess.run([sys.executable, "-m", "icectl", *props], env=env, cwd=ROOT, check=True, capture_output=True)
    assert not icectl(env, *args)[1]  # a new metadata version: the metadata folder changed

    (tmp_path / "icectl.toml").write_text("[cache]\nmax_size = '2GiB'\n")  # found in the working folder
    out, replayed = icectl(env, *args, cwd=tmp_path)
    assert not replayed
    assert icectl(env, *args, cwd=tmp_path) == (out, True)
    (tmp_path / "icectl.toml").write_text("[cache]\nmax_size = '3GiB'\n")
    assert not icectl(env, *args, cwd=tmp_path)[1]


def test_files_changed_just_now_are_not_trusted(env: dict[str, str], table: Path) -> None:
    env = {**env, "ICECTL_CACHE_RACY_SECONDS": "3600"}  # the copy was written less than an hour ago
    args = ("inspect", "files", str(table), "--json")
    icectl(env, *args)
    assert views(env) == []
    assert not icectl(env, *args)[1]


def test_a_damaged_entry_is_a_miss_and_never_half_a_document(env: dict[str, str], table: Path) -> None:
    args = ("inspect", "entries", str(table), "--json")
    expected = truth(env, *args)
    icectl(env, *args)
    (entry,) = views(env)
    good = entry.read_bytes()
    assert good.startswith(expected)  # the document, then its header and trailer
    for at in (10, len(expected) - 1, len(expected) + 5, len(good) - 3):  # body, header, trailer
        data = bytearray(good)
        data[at] ^= 0x20
        entry.write_bytes(bytes(data))
        assert icectl(env, *args) == (expected, False)
    for damaged in (good[: len(good) // 2], good[: len(good) - 1], b"junk" + good, b""):  # torn, shifted
        entry.write_bytes(damaged)
        assert icectl(env, *args) == (expected, False)
    assert entry.read_bytes() == good  # the miss recorded the document again
    assert icectl(env, *args) == (expected, True)
    aside = entry.with_name("aside")
    entry.rename(aside)
    entry.symlink_to(aside)  # a good entry, but through a link: not taken
    assert icectl(env, *args) == (expected, False)
    entry.unlink(missing_ok=True)
    os.mkfifo(entry)  # a FIFO where the entry goes: never waited on
    assert icectl(env, *args) == (expected, False)


def test_a_replay_that_cannot_write_says_so_in_one_line(env: dict[str, str], table: Path) -> None:
    args = ("inspect", "files", str(table), "--json")
    icectl(env, *args)
    assert icectl(env, *args)[1]
    with open("/dev/full", "wb") as full:
        p = subprocess.run([sys.executable, "-m", "icectl", *args], env=env, cwd=ROOT, stdout=full,
                           stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 1
    assert p.stderr.decode().splitlines() == [p.stderr.decode().strip()]  # one line, no traceback
    assert p.stderr.decode().startswith("icectl: error: writing the output failed")


def test_runs_that_a_stat_cannot_vouch_for_are_not_recorded(env: dict[str, str], table: Path, tmp_path: Path) -> None:
    env = {**env, "ICECTL_WAREHOUSE": str(tmp_path / "wh")}
    for args in (("inspect", "files", "db.v2_part", "--json"),  # the catalog's answer
                 ("inspect", "files", str(table)),  # not JSON: a terminal rendering
                 ("inspect", "table", str(table)),  # not one of the replayed views
                 ("inspect", "files", str(table), "--json", "--no-pager"),
                 ):
        icectl(env, *args)
        icectl(env, *args)
    assert len(views(env)) == 1  # the --no-pager run alone
    off = {**env, "ICECTL_CACHE": "off"}
    icectl(off, "inspect", "files", str(table), "--json", "--limit", "3")
    assert len(views(env)) == 1


def test_cache_clear_removes_the_views_and_nothing_else(env: dict[str, str], table: Path, tmp_path: Path) -> None:
    args = ("inspect", "files", str(table), "--json")
    icectl(env, *args)
    folder = Path(env["ICECTL_CACHE_DIR"]) / replay.FOLDER
    mine = folder / "notes.txt"
    mine.write_text("a user's file")
    lookalike = tmp_path / ("0" * 40 + ".view")  # an entry's name, in the working folder
    lookalike.write_text("keep")
    out = subprocess.run([sys.executable, "-m", "icectl", "cache", "info", "--json"], env=env, cwd=tmp_path,
                         check=True, capture_output=True, text=True).stdout
    assert '"entries": ' in out and views(env)
    subprocess.run([sys.executable, "-m", "icectl", "cache", "clear"], env=env, cwd=tmp_path, check=True,
                   capture_output=True)
    assert views(env) == [] and mine.exists() and lookalike.exists()
    assert not icectl(env, *args)[1]


def test_a_reader_that_goes_away_is_no_error(env: dict[str, str], table: Path) -> None:
    args = ("inspect", "entries", str(table), "--json")
    icectl(env, *args)
    for environ in ({**env, "ICECTL_CACHE": "off"}, env):  # the app, then a replay
        p = subprocess.Popen([sys.executable, "-m", "icectl", *args], env=environ, cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None and p.stderr is not None
        assert p.stdout.read(10)
        p.stdout.close()
        assert p.wait(timeout=120) == 0
        assert p.stderr.read() == b""


@pytest.mark.parametrize(("argv", "expected"), [
    (["inspect", "files", "t", "--json"], True),
    (["inspect", "files", "t", "-f", "json"], True),
    (["inspect", "files", "t", "--format=json"], True),
    (["inspect", "files", "t"], False),
    (["inspect", "files", "t", "--format", "csv"], False),
    (["inspect", "table", "t", "--json"], False),
    (["--debug", "inspect", "files", "t", "--json"], False),
    (["inspect", "files", "t", "--json", "--engine", "spark"], False),
    (["inspect", "files", "--help", "--json"], False),
    (["expire-snapshots", "t", "--json"], False),
])
def test_which_command_lines_are_replayed(argv: list[str], expected: bool) -> None:
    assert replay.replayable(argv) is expected


def test_a_configured_cache_folder_holds_the_entries_that_cache_clear_removes(
        env: dict[str, str], table: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in env.items() if k != "ICECTL_CACHE_DIR"}
    config = tmp_path / "icectl-config.toml"
    config.write_text('[cache]\ndir = "~/elsewhere"\n')  # ~: the HOME of the env fixture
    env["ICECTL_CONFIG"] = str(config)
    args = ("inspect", "files", str(table), "--json")
    expected = truth(env, *args)
    assert icectl(env, *args) == (expected, False)
    assert icectl(env, *args) == (expected, True)
    folder = Path(env["HOME"]) / "elsewhere" / replay.FOLDER
    assert len(replay.entries(folder)) == 1
    subprocess.run([sys.executable, "-m", "icectl", "cache", "clear"], env=env, cwd=ROOT, check=True,
                   capture_output=True)
    assert replay.entries(folder) == []


def test_a_working_folder_that_is_gone_runs_the_command_without_replays(env: dict[str, str], table: Path,
                                                                       tmp_path: Path) -> None:
    args = ("inspect", "files", str(table), "--json")
    expected = truth(env, *args)
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m icectl "$@"'
    for _ in range(2):
        p = subprocess.run(["sh", "-c", script, "sh", *args], env=env, capture_output=True, timeout=300)
        assert (p.returncode, p.stdout, p.stderr) == (0, expected, b"")
        gone.mkdir()
    assert views(env) == []
