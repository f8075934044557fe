"""The write gate for every writing command (issue 27, item 6).

A ``cp -r`` copy of a table is a folder whose metadata names another location (the original's):
a command writing through it would write into, or delete from, the original. Every command of the
registry that writes or deletes refuses such a copy with exit 6 and one line, and afterwards the
copy and the original are byte-identical to what they were (no file added, changed or deleted).
The same holds for a table whose metadata was edited to name another folder ("elsewhere"): its
own folder and the one named are left untouched. (The gate sits in the table's FileIO, issue 28:
:class:`icectl.table.HomeGate`.)

The cases are checked against the registry (:data:`icectl.cli.registry.COMMANDS`, groups walked
into their subcommands): a command is read-only, writes no table, or has a case here, so a new
writing command without a case fails :func:`test_every_command_is_read_only_or_has_a_gate_case`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cli.test_errors import assert_one_line_error, run_cli
from icectl.cli.registry import COMMANDS, load_commands
from icectl.errors import ExitCode
from icectl.table import load_table

# Commands that never write a table (views, checks, listings).
READ_ONLY = {"list", "health", "validate", "inspect", "branch list", "tag list", "properties list",
             "namespace list", "cache info"}
# Commands that write, but no table: a catalog namespace, the local manifest cache.
NO_TABLE = {"namespace create", "cache clear"}


@dataclass(frozen=True)
class Copied:
    """The copy (``cp -r`` of ``original``) and what a command needs to name in it."""

    copy: Path
    original: Path
    config: Path  # --config: a file-system catalog ``c`` of its own, for register
    catalog_warehouse: Path
    current: int
    parent: int
    first: int
    dev_head: int
    data_file: str
    metadata_file: str


Args = Callable[[Copied], list[str]]

# command path -> the argument lists to run it with on the copy (each must exit 6).
CASES: dict[str, list[Args]] = {
    "create": [lambda c: ["create", str(c.copy), "--schema", "id long"]],
    "add-files": [lambda c: ["add-files", str(c.copy), c.data_file]],
    "expire-snapshots": [lambda c: ["expire-snapshots", str(c.copy)],
                         lambda c: ["expire-snapshots", str(c.copy), "--retain-last", "1", "--older-than", "0"]],
    "compact": [lambda c: ["compact", str(c.copy)]],
    "rewrite-data-files": [lambda c: ["rewrite-data-files", str(c.copy), "--rewrite-all"]],
    "rewrite-position-delete-files": [lambda c: ["rewrite-position-delete-files", str(c.copy), "--rewrite-all"],
                                      lambda c: ["rewrite-position-delete-files", str(c.copy),
                                                 "--convert-equality-deletes"]],
    "upgrade": [lambda c: ["upgrade", str(c.copy), "--to", "3"]],
    "remove-files": [lambda c: ["remove-files", str(c.copy), c.data_file]],
    "rollback": [lambda c: ["rollback", str(c.copy), "--to-snapshot", str(c.parent)]],
    "set-current": [lambda c: ["set-current", str(c.copy), "--snapshot", str(c.first)]],
    "cherrypick": [lambda c: ["cherrypick", str(c.copy), str(c.dev_head)]],
    "publish": [lambda c: ["publish", str(c.copy), "some-wap-id"]],
    "fast-forward": [lambda c: ["fast-forward", str(c.copy), "dev", "--to", "main"]],
    "compute-partition-stats": [lambda c: ["compute-partition-stats", str(c.copy)]],
    "remove-orphan-files": [lambda c: ["remove-orphan-files", str(c.copy), "--older-than", "0"]],
    "register": [lambda c: ["register", "c.db.copied", c.metadata_file]],
    "drop": [lambda c: ["drop", str(c.copy)], lambda c: ["drop", str(c.copy), "--purge"]],
    "branch create": [lambda c: ["branch", "create", str(c.copy), "b1"],
                      lambda c: ["branch", "create", str(c.copy), "b2", "--snapshot", str(c.first),
                                 "--retain-last", "2"]],
    "branch replace": [lambda c: ["branch", "replace", str(c.copy), "dev", "--snapshot", str(c.first)]],
    "branch drop": [lambda c: ["branch", "drop", str(c.copy), "dev"]],
    "tag create": [lambda c: ["tag", "create", str(c.copy), "t1"]],
    "tag replace": [lambda c: ["tag", "replace", str(c.copy), "after_merge", "--snapshot", str(c.first)]],
    "tag drop": [lambda c: ["tag", "drop", str(c.copy), "after_merge"]],
    "properties set": [lambda c: ["properties", "set", str(c.copy), "owner=someone"]],
    "properties unset": [lambda c: ["properties", "unset", str(c.copy), "owner"]],
}


def command_paths() -> set[str]:
    """Every command of the CLI: top-level ones, and each subcommand of a group ('branch create');
    ``inspect`` (a group of views) counts as one."""
    paths: set[str] = set()
    for name, entry in COMMANDS.items():
        command = load_commands(entry, only=name)[name]
        subcommands = getattr(command, "commands", None)  # a group's
        if subcommands is not None and name != "inspect":
            paths.update(f"{name} {sub}" for sub in subcommands)
        else:
            paths.add(name)
    return paths


def test_every_command_is_read_only_or_has_a_gate_case() -> None:
    paths = command_paths()
    assert not READ_ONLY & NO_TABLE and not (READ_ONLY | NO_TABLE) & set(CASES)
    missing = paths - READ_ONLY - NO_TABLE - set(CASES)
    assert not missing, f"writing commands without a case in CASES: {sorted(missing)}"
    assert not (READ_ONLY | NO_TABLE | set(CASES)) - paths, "names that are no command any more"


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (hidden .crc sidecars too): relative path -> sha256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def name_elsewhere(table_dir: Path, elsewhere: Path) -> None:
    """Make every metadata file of ``table_dir`` name ``elsewhere`` as the table's location (paths of
    manifests and data files stay as they are)."""
    for f in (table_dir / "metadata").glob("*.metadata.json"):
        doc = json.loads(f.read_text())
        doc["location"] = str(elsewhere)
        f.write_text(json.dumps(doc))
    for crc in (table_dir / "metadata").glob(".*.metadata.json.crc"):
        crc.unlink()  # Hadoop's checksums of the files just edited


@pytest.fixture(params=["copy", "elsewhere"])
def copied(request: pytest.FixtureRequest, spark_clone: Any, tmp_path: Path) -> Copied:
    original = Path(spark_clone("v2_part").location)  # private: a write into it would not hurt other tests
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)  # `cp -r`: the metadata still names the original's location
    if request.param == "elsewhere":  # the table stays where it is; its metadata names another folder
        original = tmp_path / "elsewhere"
        shutil.copytree(copy / "data", original / "data")
        name_elsewhere(copy, original)
    warehouse = tmp_path / "catalog-wh"
    (warehouse / "db").mkdir(parents=True)
    config = tmp_path / "icectl.toml"
    config.write_text(f'default-catalog = "c"\n[catalog.c]\ntype = "hadoop"\nwarehouse = "{warehouse}"\n')
    table = load_table(str(copy))
    md = table.metadata
    current = md.current_snapshot()
    assert current is not None and current.parent_snapshot_id is not None
    dev = md.snapshot_for_ref("dev")
    assert dev is not None and md.ref("after_merge") is not None
    data_file = next(str(p) for p in sorted((copy / "data").rglob("*.parquet")) if "deletes" not in p.name)
    return Copied(copy, original, config, warehouse, current.snapshot_id, current.parent_snapshot_id,
                  md.snapshots[0].snapshot_id, dev.snapshot_id, data_file, table.metadata_location)


@pytest.mark.parametrize(("path", "index"), [(p, i) for p, args in CASES.items() for i in range(len(args))],
                         ids=lambda v: str(v))
def test_a_copied_table_is_refused_by_every_writing_command(copied: Copied, path: str, index: int) -> None:
    before = (tree_digest(copied.copy), tree_digest(copied.original), tree_digest(copied.catalog_warehouse))
    args = CASES[path][index](copied)
    p = run_cli("--config", str(copied.config), *args)
    # create refuses any existing table (a copy included) before it looks at its metadata
    assert_one_line_error(p, ExitCode.REFUSED, "already exists" if path == "create" else
                          "is not the location its metadata names")
    after = (tree_digest(copied.copy), tree_digest(copied.original), tree_digest(copied.catalog_warehouse))
    for label, old, new in zip(("copy", "original", "catalog warehouse"), before, after, strict=True):
        assert new == old, (label, sorted(set(new) ^ set(old)), [k for k in old if new.get(k, old[k]) != old[k]])
