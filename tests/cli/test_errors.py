"""Bad input: one clear line on stderr naming the file, the documented exit code, no traceback.

Each case damages a private, Spark-written copy of a table and runs the real CLI entry point.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.spark import latest_metadata_path

from icectl.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("ICECTL_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "icectl", *args], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=120)


def assert_one_line_error(p: subprocess.CompletedProcess[str], code: int, *must_mention: str) -> None:
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == ""
    for text in must_mention:
        assert text in lines[0], (text, lines[0])


@pytest.fixture(scope="module")
def damaged(spark: Any, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Callable[[], Path]]:
    """A private copy of a v2 table (built once per module), restored from a snapshot of its
    directory before each use so every test starts from an intact table. Named after the module:
    another module that imports this fixture gets a copy of its own (one name made both collide)."""
    from support.fixtures import clone_table

    t = clone_table(spark, "v2_part", "errors_v2_" + request.module.__name__.rsplit(".", 1)[-1])
    pristine = tmp_path_factory.mktemp("pristine") / "t"
    shutil.copytree(t.location, pristine)

    def fresh() -> Path:
        shutil.rmtree(t.location)
        shutil.copytree(pristine, t.location)
        return Path(t.location)

    yield fresh


def _manifest_paths(table_dir: Path) -> tuple[str, list[str]]:
    """(manifest list, manifests) of the current snapshot, read with icectl itself."""
    out = run_cli("inspect", "manifests", str(table_dir), "--json")
    doc = json.loads(out.stdout)
    snaps = json.loads(run_cli("inspect", "snapshots", str(table_dir), "--json").stdout)["rows"]
    current = next(s for s in snaps if s["snapshot_id"] == doc["snapshot_id"])
    return current["manifest_list"], [r["path"] for r in doc["rows"]]


def test_missing_table_directory(tmp_path: Path) -> None:
    p = run_cli("inspect", "table", str(tmp_path / "nope"))
    assert_one_line_error(p, ExitCode.NOT_FOUND, str(tmp_path / "nope"))


def test_directory_that_is_not_a_table(tmp_path: Path) -> None:
    p = run_cli("inspect", "snapshots", str(tmp_path))
    assert_one_line_error(p, ExitCode.NOT_FOUND, str(tmp_path), "no Iceberg table")


def test_missing_table_in_default_catalog(tmp_path: Path) -> None:
    p = run_cli("inspect", "table", "db.nothing_here", env={"ICECTL_WAREHOUSE": str(tmp_path)})
    assert_one_line_error(p, ExitCode.NOT_FOUND, "db.nothing_here")


def test_missing_metadata_file(tmp_path: Path) -> None:
    missing = tmp_path / "v9.metadata.json"
    p = run_cli("inspect", "table", str(missing))
    assert_one_line_error(p, ExitCode.NOT_FOUND, str(missing))


def test_usage_error_exit_code() -> None:
    p = run_cli("inspect", "files")
    assert p.returncode == ExitCode.USAGE and "Traceback" not in p.stderr


def test_corrupt_metadata_json(damaged: Callable[[], Path]) -> None:
    table = damaged()
    meta = latest_metadata_path(table)
    meta.write_text(meta.read_text()[:200])
    p = run_cli("inspect", "table", str(table))
    assert_one_line_error(p, ExitCode.CORRUPT, str(meta), "JSON")


def test_metadata_missing_required_field(damaged: Callable[[], Path]) -> None:
    table = damaged()
    meta = latest_metadata_path(table)
    doc = json.loads(meta.read_text())
    del doc["schemas"], doc["current-schema-id"]
    meta.write_text(json.dumps(doc))
    p = run_cli("inspect", "table", str(table))
    assert_one_line_error(p, ExitCode.CORRUPT, str(meta), "schema")


def test_unsupported_format_version(damaged: Callable[[], Path]) -> None:
    table = damaged()
    meta = latest_metadata_path(table)
    doc = json.loads(meta.read_text())
    doc["format-version"] = 7
    meta.write_text(json.dumps(doc))
    p = run_cli("inspect", "snapshots", str(table))
    assert_one_line_error(p, ExitCode.CORRUPT, str(meta), "7")


def test_truncated_manifest_list(damaged: Callable[[], Path]) -> None:
    table = damaged()
    manifest_list, _ = _manifest_paths(table)
    data = Path(manifest_list).read_bytes()
    Path(manifest_list).write_bytes(data[: len(data) // 2])
    p = run_cli("inspect", "manifests", str(table))
    assert_one_line_error(p, ExitCode.CORRUPT, manifest_list)


def test_truncated_manifest(damaged: Callable[[], Path]) -> None:
    table = damaged()
    _, manifests = _manifest_paths(table)
    data = Path(manifests[0]).read_bytes()
    Path(manifests[0]).write_bytes(data[: len(data) - 40])
    p = run_cli("inspect", "files", str(table))
    assert_one_line_error(p, ExitCode.CORRUPT, manifests[0])


def test_not_an_avro_file(damaged: Callable[[], Path]) -> None:
    table = damaged()
    _, manifests = _manifest_paths(table)
    Path(manifests[-1]).write_bytes(b"this is not avro" * 10)
    p = run_cli("inspect", "entries", str(table))
    assert_one_line_error(p, ExitCode.CORRUPT, manifests[-1])


def test_missing_manifest(damaged: Callable[[], Path]) -> None:
    table = damaged()
    _, manifests = _manifest_paths(table)
    os.remove(manifests[1])
    p = run_cli("inspect", "files", str(table), "--json")
    assert p.returncode == ExitCode.NOT_FOUND, p.stderr
    line = p.stderr.strip().splitlines()
    assert len(line) == 1 and manifests[1] in line[0] and "Traceback" not in p.stderr


def test_debug_shows_traceback(damaged: Callable[[], Path]) -> None:
    table = damaged()
    meta = latest_metadata_path(table)
    meta.write_text("{")
    p = run_cli("--debug", "inspect", "table", str(table))
    assert p.returncode == ExitCode.CORRUPT
    assert "Traceback" in p.stderr


def test_unknown_snapshot_and_ref(damaged: Callable[[], Path]) -> None:
    table = damaged()
    p = run_cli("inspect", "files", str(table), "--snapshot", "123")
    assert_one_line_error(p, ExitCode.NOT_FOUND, "123")
    p = run_cli("inspect", "files", str(table), "--ref", "no_such_branch")
    assert_one_line_error(p, ExitCode.NOT_FOUND, "no_such_branch")


def test_unreachable_object_storage() -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never accepting
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        p = run_cli("inspect", "table", "s3://bucket/wh/db/t",
                    env={"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "k",
                         "AWS_SECRET_ACCESS_KEY": "s", "AWS_DEFAULT_REGION": "us-east-1"})
    assert_one_line_error(p, ExitCode.STORAGE, "s3://bucket/wh/db/t")
