"""Metadata Iceberg Java refuses to load: every writing command refuses it (exit 4, nothing written,
nothing deleted), read-only commands still show it, and validate names the rule it breaks.

Each case damages a private copy of a Spark-written table (issue 11, item 1). The first case is the
one the fault campaign found: the main branch naming a snapshot the table lacks made
expire-snapshots retain nothing and delete the files of every snapshot, with exit 0.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli.test_errors import assert_one_line_error, run_cli
from support.corrupt import copy_table, edit_metadata, metadata_path
from support.forge import property_change

from icectl.errors import CorruptInputError, ExitCode
from icectl.spec.metadata import TableMetadata
from icectl.spec.soundness import metadata_problems
from icectl.table.commit import commit
from icectl.table.write_guard import check_metadata_sound

Edit = Callable[[dict[str, Any]], None]
MISSING = 4242  # no snapshot has this id


def _current(doc: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])


def _oldest(doc: dict[str, Any]) -> dict[str, Any]:
    return min(doc["snapshots"], key=lambda s: s["sequence-number"])


def _set_ref(doc: dict[str, Any], name: str, snapshot_id: int) -> None:
    # setdefault: another damage of a random combination may have dropped the ref or all refs
    doc.setdefault("refs", {}).setdefault(name, {"type": "branch"})["snapshot-id"] = snapshot_id


def _dangling_main(doc: dict[str, Any]) -> None:
    doc["current-snapshot-id"] = MISSING
    _set_ref(doc, "main", MISSING)


def _only_ref_dangling(doc: dict[str, Any]) -> None:
    # The fault campaign's case: the one branch retains nothing, so every snapshot "expires".
    doc["current-snapshot-id"] = MISSING
    doc["refs"] = {"main": {"snapshot-id": MISSING, "type": "branch"}}


def _dangling_branch(doc: dict[str, Any]) -> None:
    _set_ref(doc, "after_merge", MISSING)


def _dangling_current(doc: dict[str, Any]) -> None:
    doc["current-snapshot-id"] = MISSING
    doc.pop("refs", None)  # a reader then assumes main at current-snapshot-id


def _duplicate_id(doc: dict[str, Any]) -> None:
    doc["snapshots"].append(dict(_oldest(doc)))


def _cycle(doc: dict[str, Any]) -> None:
    _oldest(doc)["parent-snapshot-id"] = doc["current-snapshot-id"]


def _negative_sequence_number(doc: dict[str, Any]) -> None:
    _oldest(doc)["sequence-number"] = -5


def _negative_timestamp(doc: dict[str, Any]) -> None:
    _oldest(doc)["timestamp-ms"] = -1


def _overflowing_snapshot_id(doc: dict[str, Any]) -> None:
    _oldest(doc)["snapshot-id"] = 2**64


def _overflowing_timestamp(doc: dict[str, Any]) -> None:
    _oldest(doc)["timestamp-ms"] = 2**63


def _duplicate_schema_id(doc: dict[str, Any]) -> None:
    doc["schemas"].append(dict(doc["schemas"][0]))


def _sequence_above_last(doc: dict[str, Any]) -> None:
    doc["last-sequence-number"] = _current(doc)["sequence-number"] - 1


@dataclass(frozen=True)
class Damage:
    name: str
    edit: Edit
    rule: str
    loads: bool = True  # False: beyond int64, the loader itself refuses (as Java's JsonUtil.getLong)


DAMAGES = [
    Damage("only-ref-dangling", _only_ref_dangling, "metadata.refs-exist"),
    Damage("dangling-main", _dangling_main, "metadata.refs-exist"),
    Damage("dangling-branch", _dangling_branch, "metadata.refs-exist"),
    Damage("dangling-current-snapshot-id", _dangling_current, "metadata.refs-exist"),
    Damage("duplicate-snapshot-id", _duplicate_id, "metadata.snapshot-ids-unique"),
    Damage("duplicate-schema-id", _duplicate_schema_id, "metadata.ids-unique"),
    Damage("parent-cycle", _cycle, "metadata.snapshot-parent-cycle"),
    Damage("negative-sequence-number", _negative_sequence_number, "metadata.number-range"),
    Damage("negative-timestamp", _negative_timestamp, "metadata.number-range"),
    Damage("sequence-number-above-last", _sequence_above_last, "metadata.sequence-number-bound"),
    Damage("snapshot-id-beyond-int64", _overflowing_snapshot_id, "metadata.number-range", loads=False),
    Damage("timestamp-beyond-int64", _overflowing_timestamp, "metadata.number-range", loads=False),
]


def listing(table: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under the table directory with size, mtime and content hash proxy."""
    out: dict[str, tuple[int, int, str]] = {}
    for p in sorted(table.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(table))] = (st.st_size, st.st_mtime_ns, p.read_bytes()[-64:].hex())
    return out


@pytest.fixture
def v2_copy(spark_tables: Any, tmp_path: Path) -> Path:
    return copy_table(spark_tables["v2_part"].location, tmp_path / "t")


def _writing_commands(table: Path, extra_file: Path) -> list[list[str]]:
    return [
        ["expire-snapshots", str(table), "--older-than", "0s", "--retain-last", "1"],
        ["compact", str(table), "--target-size", "1MiB"],
        ["add-files", str(table), str(extra_file)],
        ["upgrade", str(table), "--to", "3"],
    ]


def _a_parquet_file(table: Path, where: Path) -> Path:
    """A Parquet file with the table's columns: a copy of one of its data files, outside it."""
    src = next(p for p in sorted((table / "data").rglob("*.parquet")))
    where.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(src, where / "extra.parquet"))


def test_pristine_copy_expires_and_deletes_files(v2_copy: Path) -> None:
    # The control: the very command the damaged cases run does delete files on the sound table.
    before = listing(v2_copy)
    p = run_cli("expire-snapshots", str(v2_copy), "--older-than", "0s", "--retain-last", "1", "--json")
    assert p.returncode == 0, p.stderr
    deleted = set(before) - set(listing(v2_copy))
    assert any(name.startswith("data/") for name in deleted), deleted


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.name for d in DAMAGES])
def test_writing_commands_refuse_and_change_nothing(damage: Damage, v2_copy: Path, tmp_path: Path) -> None:
    extra = _a_parquet_file(v2_copy, tmp_path / "outside")
    meta = str(edit_metadata(v2_copy, damage.edit))
    before = listing(v2_copy)
    for args in _writing_commands(v2_copy, extra):
        p = run_cli(*args)
        assert_one_line_error(p, ExitCode.CORRUPT, meta)
        assert listing(v2_copy) == before, args


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.name for d in DAMAGES])
def test_read_only_commands_show_it_and_validate_names_the_rule(damage: Damage, v2_copy: Path) -> None:
    meta = str(edit_metadata(v2_copy, damage.edit))
    snaps = run_cli("inspect", "snapshots", str(v2_copy), "--json")
    if damage.loads:
        assert snaps.returncode == 0, snaps.stderr
        assert len(json.loads(snaps.stdout)["rows"]) >= 3
        for view in ("table", "history", "refs", "files"):
            p = run_cli("inspect", view, str(v2_copy), "--json")
            assert p.returncode == 0 and "Traceback" not in p.stderr, (view, p.stderr)
    else:  # Java cannot read such a number either: one line, exit 4, naming the file
        assert_one_line_error(snaps, ExitCode.CORRUPT, meta, "64-bit")
    v = run_cli("validate", str(v2_copy), "--json")
    assert v.returncode == ExitCode.FINDINGS, v.stderr
    rules = {r["rule"] for r in json.loads(v.stdout)["rows"] if r["severity"] == "error"}
    assert damage.rule in rules, rules


@pytest.mark.parametrize("seed", range(6))
def test_random_combinations_of_damage_change_nothing(seed: int, v2_copy: Path, tmp_path: Path) -> None:
    # Damages stacked at random (each alone is refused above): still refused, still nothing touched.
    rng = random.Random(seed)
    chosen = rng.sample(DAMAGES, rng.randint(2, 4))
    extra = _a_parquet_file(v2_copy, tmp_path / "outside")
    meta = ""
    for d in chosen:
        meta = str(edit_metadata(v2_copy, d.edit))
    before = listing(v2_copy)
    for args in _writing_commands(v2_copy, extra):
        p = run_cli(*args)
        assert_one_line_error(p, ExitCode.CORRUPT, meta)
        assert listing(v2_copy) == before, ([d.name for d in chosen], args)


def test_commit_refuses_a_base_damaged_since_the_table_was_loaded(v2_copy: Path) -> None:
    # commit() re-reads the base; a concurrent writer may have left metadata Java refuses.
    from icectl.config import Config
    from icectl.storage import FileIO
    from icectl.table import load_table

    table = load_table(str(v2_copy), Config({}), FileIO())
    edit_metadata(v2_copy, _dangling_main)
    before = listing(v2_copy)
    with pytest.raises(CorruptInputError, match="4242"):
        commit(table, lambda md: property_change({"k": "v"}))
    assert listing(v2_copy) == before


def test_problems_name_each_defect_once(v2_copy: Path) -> None:
    doc = json.loads(metadata_path(v2_copy).read_text())
    assert metadata_problems(TableMetadata.from_json(doc)) == []
    for edit, kind in ((_dangling_branch, "refs-exist"), (_cycle, "snapshot-parent-cycle"),
                       (_duplicate_id, "snapshot-ids-unique"), (_negative_timestamp, "number-range")):
        broken = json.loads(json.dumps(doc))
        edit(broken)
        kinds = [p.kind for p in metadata_problems(TableMetadata.from_json(broken))]
        assert kind in kinds and kinds.count(kind) == 1, kinds
        with pytest.raises(CorruptInputError) as e:
            check_metadata_sound(TableMetadata.from_json(broken), "/t/metadata/v9.metadata.json")
        assert e.value.exit_code == ExitCode.CORRUPT and "/t/metadata/v9.metadata.json" in e.value.one_line()
