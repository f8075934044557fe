"""The gate before any write: metadata Java would refuse (exit 4) and a table away from its home (exit 6)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
from support.forge import forge_commit
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import CorruptInputError, ExitCode, RefusedError
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import SnapshotRef
from icectl.spec.updates import SetProperties, TableChange
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.write_guard import check_metadata_home, check_metadata_sound, check_table_home, check_writable
from unit.table.test_commit import fs_table


def test_unsound_metadata_is_refused_naming_the_first_problem_and_the_table(tmp_path: Path) -> None:
    table = load_table(str(fs_table(tmp_path)))
    md = table.metadata
    check_metadata_sound(md, table.metadata_location)  # a fresh table is sound
    dangling = md.replace(refs={"audit": SnapshotRef(405, "tag"), "dev": SnapshotRef(406)})
    location = "/wh/t/metadata/v3.metadata.json"
    with pytest.raises(CorruptInputError) as e:
        check_metadata_sound(dangling, location)
    err = e.value
    assert err.exit_code == ExitCode.CORRUPT and err.path == location
    assert err.message.startswith(f"refusing to write: table metadata {location}: ")
    assert "'audit' names snapshot 405" in err.message and err.message.endswith("(and 1 more problem(s))")
    assert err.hint is not None and "'icectl validate /wh/t'" in err.hint  # the table folder, not the file
    with pytest.raises(CorruptInputError) as e:
        check_metadata_sound(md.replace(refs={"dev": SnapshotRef(406)}), "/x/loose.metadata.json")
    assert "more problem" not in e.value.message and "'icectl validate /x/loose.metadata.json'" in (e.value.hint or "")


def test_a_copied_table_is_refused_where_the_original_is_not(tmp_path: Path) -> None:
    home = fs_table(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    check_table_home(load_table(str(home)))
    check_table_home(load_table(str(home / "metadata" / "v1.metadata.json")))  # its own vN file: same home
    link = tmp_path / "link"
    link.symlink_to(home)
    check_table_home(load_table(str(link)))  # one folder under two names
    for address in (copy, copy / "metadata" / "v1.metadata.json"):
        with pytest.raises(RefusedError, match=f"table folder {copy} is not the location its metadata names") as e:
            check_table_home(load_table(str(address)))
        assert e.value.exit_code == ExitCode.REFUSED and "rewrite_table_path" in (e.value.hint or "")


def test_check_writable_makes_both_checks_soundness_first(tmp_path: Path) -> None:
    home = fs_table(tmp_path)
    check_writable(load_table(str(home)))
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    with pytest.raises(RefusedError):
        check_writable(load_table(str(copy)))
    table = load_table(str(home))
    forge_commit(table, lambda md: md.replace(refs={"main": SnapshotRef(404)}))
    shutil.rmtree(copy)
    shutil.copytree(home, copy)
    with pytest.raises(CorruptInputError):  # unsound and away from home: the metadata is named first
        check_writable(load_table(str(copy)))
    with pytest.raises(CorruptInputError):
        check_writable(load_table(str(home)))


def test_commit_itself_refuses_a_copied_table_before_reading_or_writing(tmp_path: Path) -> None:
    """The gate sits in the commit path: no command can forget it (issue 27)."""
    home = fs_table(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    def listing() -> tuple[list[str], ...]:
        return tuple(sorted(p.name for p in (d / "metadata").iterdir()) for d in (copy, home))

    before = listing()
    built: list[object] = []

    def build(base: TableMetadata) -> TableChange:
        built.append(base)
        return TableChange((), (SetProperties({"k": "v"}),))

    with pytest.raises(RefusedError, match="is not the location its metadata names"):
        commit(load_table(str(copy)), build)
    assert built == []  # refused before the change was even built
    assert listing() == before
    assert commit(load_table(str(home)), build).committed  # the original itself commits


def test_a_copied_metadata_file_is_refused_for_register(tmp_path: Path) -> None:
    home = fs_table(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    md = load_table(str(home)).metadata
    check_metadata_home(str(home / "metadata" / "v1.metadata.json"), md)
    check_metadata_home(str(tmp_path / "loose.metadata.json"), md)  # no metadata/ folder: nothing to compare
    with pytest.raises(RefusedError, match=f"table folder {copy} is not the location") as e:
        check_metadata_home(str(copy / "metadata" / "v1.metadata.json"), md)
    assert e.value.exit_code == ExitCode.REFUSED
    # a catalog table keeping its metadata files in write.metadata.path: that folder is their home
    elsewhere = md.replace(properties={**md.properties, "write.metadata.path": str(copy / "metadata")})
    check_metadata_home(str(copy / "metadata" / "v1.metadata.json"), elsewhere)


def test_the_gate_sits_in_the_tables_fileio(tmp_path: Path) -> None:
    """Issue 28: no writer can forget the gate. A copied table's ``table.io`` refuses every change
    (write, delete, mkdir, atomic replace, no-replace rename) before touching the store, also in the
    copy a Spark executor unpickles; reads stay free, and the original's FileIO writes."""
    original = tmp_path / "t"
    assert CliRunner().invoke(app, ["create", str(original), "--schema", "id long"]).exit_code == 0
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    before = sorted(p.name for p in (original / "metadata").iterdir())
    table = load_table(str(copy))
    target = str(original / "metadata" / "x.bin")
    changes = [lambda io: io.write(target, b"x"), lambda io: io.delete(str(original / "metadata" / before[0])),
               lambda io: io.makedirs(str(original / "new")), lambda io: io.write_atomic(target, b"x"),
               lambda io: io.write_if_absent(target, b"x")]
    for io in (table.io, pickle.loads(pickle.dumps(table.io))):
        for change in changes:
            with pytest.raises(RefusedError, match="is not the location its metadata names"):
                change(io)
        assert io.read(table.metadata_location)  # reading is not gated
    assert sorted(p.name for p in (original / "metadata").iterdir()) == before and not (original / "new").exists()
    home = load_table(str(original))
    home.io.write(target, b"x")  # at home: written
    assert (original / "metadata" / "x.bin").read_bytes() == b"x"
