"""`icectl cache info` and `icectl cache clear` through the command line (typer's CliRunner).

The commands run from their own group (built by ``commands.cache.register``): the root app lists them through
startup's lazy command registry; ``--config`` is what the root callback sets in the CLI state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

from icectl.cli import framework
from icectl.cli.commands.cache import register
from icectl.storage import FileIdentity
from icectl.table import manifest_cache as mc
from icectl.table.manifest_cache import ManifestCache


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache folder with three entries, named by $ICECTL_CACHE_DIR."""
    for name in ("ICECTL_CACHE", "ICECTL_CACHE_MAX_SIZE", "ICECTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "cache"
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(folder))
    cache = ManifestCache(folder)
    for i in range(3):
        cache.put("manifest/1", f"/t/m{i}.avro", FileIdentity(i, "v"), pa.table({"a": list(range(10 * i + 1))}))
    mc.configure_cache(None)
    yield folder
    mc.configure_cache(None)
    mc.set_cache_enabled(True)


def run(*args: str, config: Path | None = None) -> tuple[int, str]:
    old = framework.state.config_path
    framework.state.config_path = config  # the root's --config
    try:
        r = CliRunner().invoke(_cache_app(), list(args))
    finally:
        framework.state.config_path = old
    return r.exit_code, r.output


def entries_bytes(folder: Path) -> tuple[int, int]:
    files = list((folder / "manifests").glob("*.arrow"))
    return len(files), sum(f.stat().st_size for f in files)


def test_info_json(folder: Path) -> None:
    code, out = run("info", "--json")
    assert code == 0, out
    doc = json.loads(out)
    n, size = entries_bytes(folder)
    assert doc == {"view": "cache_info", "dir": str(folder), "enabled": True, "writable": True,
                   "entries": 3, "bytes": size, "max_bytes": 2 * 1024**3}
    assert n == 3


def test_info_terminal(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run("info")
    assert code == 0, out
    assert out.startswith("manifest cache (on): 3 entries, ")
    assert f"of 2.0 GiB in {folder}" in out.splitlines()[0]
    monkeypatch.setenv("ICECTL_CACHE", "off")
    code, out = run("info", "--json")
    assert code == 0 and json.loads(out)["enabled"] is False


def test_clear_dry_run_then_clear(folder: Path) -> None:
    n, size = entries_bytes(folder)
    code, out = run("clear", "--dry-run", "--json")
    assert code == 0, out
    assert json.loads(out) == {"view": "cache_clear", "dir": str(folder), "dry_run": True, "entries": 3,
                               "bytes": size}
    assert entries_bytes(folder) == (n, size)
    code, out = run("clear")
    assert code == 0, out
    assert out.splitlines()[0] == f"removed 3 entries ({size / 1024:.1f} KiB) from {folder}"
    assert entries_bytes(folder) == (0, 0)
    code, out = run("clear", "--json")
    assert json.loads(out)["entries"] == 0


def test_the_config_file_names_the_folder_and_the_bound(folder: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICECTL_CACHE_DIR")
    config = tmp_path / "icectl.toml"
    config.write_text(f'[cache]\ndir = "{folder}"\nmax-size = "500MB"\n')
    code, out = run("info", "--json", config=config)
    assert code == 0, out
    doc = json.loads(out)
    assert (doc["dir"], doc["entries"], doc["max_bytes"]) == (str(folder), 3, 500_000_000)


def test_a_bad_max_size_is_a_config_error(tmp_path: Path, folder: Path) -> None:
    config = tmp_path / "icectl.toml"
    config.write_text('[cache]\nmax-size = "lots"\n')
    code, out = run("info", config=config)
    assert code != 0
    assert "max-size 'lots' is not a size" in out


def _cache_app() -> typer.Typer:
    """The ``cache`` group as the root app adds it, run on its own."""
    root = typer.Typer()
    register(root)
    return root.registered_groups[0].typer_instance
