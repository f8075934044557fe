"""Property: damaged and hostile metadata never makes a writing command lose a file.

Real Spark-written tables (``v2_part``: branch, tag, position deletes, two specs; ``v3_dv``:
deletion vectors in Puffin files, row lineage) are damaged at random in the ways the issue-11
fault campaign found, then one writing command runs on them: ``expire-snapshots``, ``compact``,
``add-files``, ``upgrade`` or (on ``v3_dv`` upgraded to icectl's v4 layout) ``remove-files``.
The damage:

* what Iceberg Java refuses to load: a branch or ``current-snapshot-id`` naming no snapshot, a
  duplicate snapshot id, a parent cycle, sequence numbers or timestamps negative or beyond 64 bits;
* a metadata ``location`` other than the table's folder (a parent: a widened fence; a copy);
* hostile paths a valid table may hold: metadata-log entries naming live data files, manifest
  lists, files outside the table and files behind a symlink out of the table (with
  ``write.metadata.delete-after-commit.enabled`` on), statistics files of expirable snapshots at
  those paths and at an in-table symlink alias of a live file.

After every command, judged by this file's own reader of the Avro files (never icectl's):

* no file outside the table's folder changed or disappeared;
* every file the undamaged table's branches and tags reach still exists;
* the exit code is one of the documented ones (never 1, an internal error) and stderr holds no traceback;
* a command that failed changed nothing in the table's folder; metadata Java refuses to load,
  and a location that is not the table's folder, always fail;
* after a success, every file any snapshot of the new current metadata reaches exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from support.fixtures import clone_table
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import EXIT_CODE_TABLE, ExitCode

EXAMPLES = int(os.environ.get("ICECTL_HOSTILE_EXAMPLES", "30"))
DOCUMENTED = {code for code, _name, _meaning in EXIT_CODE_TABLE} - {ExitCode.INTERNAL}
MAX_LONG = 2**63 - 1


# --------------------------------------------------------------------------- an independent reader


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def _avro_records(path: str) -> list[dict[str, Any]]:
    with open(_local(path), "rb") as f:
        return list(fastavro.reader(f))


def _by_field_id(value: Any, field: Any) -> Any:
    """A Parquet value with its struct members keyed by Iceberg field id (pyarrow field metadata)."""
    import pyarrow as pa

    if value is None or not pa.types.is_struct(field.type):
        return value
    return {int(f.metadata[b"PARQUET:field_id"]): _by_field_id(value[f.name], f) for f in field.type}


def _tracked_files(path: str) -> list[dict[int, Any]]:
    """The rows of a v4 Parquet manifest, keyed by field id (the merged spec's tracked_file)."""
    import pyarrow.parquet as pq

    table = pq.read_table(_local(path))
    fields = list(table.schema)
    return [{int(f.metadata[b"PARQUET:field_id"]): _by_field_id(row[f.name], f) for f in fields}
            for row in table.to_pylist()]


def _is_parquet(path: str) -> bool:
    with open(_local(path), "rb") as f:
        return f.read(4) == b"PAR1"


LIVE_V4 = (0, 1, 4)  # EXISTING, ADDED, MODIFIED


def _v4_reach(root: str, out: set[str], data: set[str]) -> None:
    """What a v4 root reaches (the merged spec: tracked_file 147 tracking, 134 content_type, 100
    location, 148 deletion_vector {155 location}), manifest DVs ignored: every live row of every
    live leaf counts, which is more, never less, than the snapshot reaches. A root of icectl's
    earlier proposal layout (Avro) is read as that layout has it."""
    out.add(root)
    if not _is_parquet(root):
        _proposal_reach(root, out, data)
        return
    for e in _tracked_files(root):
        if e[147][0] not in LIVE_V4:
            continue
        out.add(e[100])
        if e[134] == 0:
            data.add(e[100])
            if e.get(148):
                out.add(e[148][155])
        if e[134] not in (3, 4):
            continue
        if _is_parquet(e[100]):
            for row in _tracked_files(e[100]):
                if row[147][0] in LIVE_V4:
                    out.add(row[100])
                    data.add(row[100])
                    if row.get(148):
                        out.add(row[148][155])
            continue
        for r in _avro_records(e[100]):  # a v1-v3 manifest
            if r["status"] != 2:
                out.add(r["data_file"]["file_path"])
                if r["data_file"].get("content", 0) == 0:
                    data.add(r["data_file"]["file_path"])


def _proposal_reach(root: str, out: set[str], data: set[str]) -> None:
    for e in _avro_records(root):
        if e["version_info"]["status"] == 2:
            continue
        out.add(e["location"])
        if e["content_type"] == 0:
            data.add(e["location"])
        if e["content_type"] not in (3, 4):
            continue
        for row in _avro_records(e["location"]):  # a v1-v3 manifest or a v4 leaf
            if "data_file" in row:
                if row["status"] != 2:
                    out.add(row["data_file"]["file_path"])
                    if row["data_file"].get("content", 0) == 0:
                        data.add(row["data_file"]["file_path"])
            elif row["version_info"]["status"] != 2:
                out.add(row["location"])
                if row["content_type"] == 0:
                    data.add(row["location"])


def reachable(md: dict[str, Any], *, data_only: bool = False) -> set[str]:
    """Every file (real path) the snapshots of ``md`` reach: manifest lists (v4: roots), manifests,
    live data and delete files, statistics files (``data_only``: the live data files alone)."""
    out: set[str] = set()
    data: set[str] = set()
    for snap in md.get("snapshots", []):
        if snap.get("root-manifest"):
            _v4_reach(snap["root-manifest"], out, data)
            continue
        ml = snap.get("manifest-list")
        if not ml:
            continue
        out.add(ml)
        for m in _avro_records(ml):
            out.add(m["manifest_path"])
            for e in _avro_records(m["manifest_path"]):
                if e["status"] != 2:  # DELETED entries are history, not live files
                    out.add(e["data_file"]["file_path"])
                    if e["data_file"].get("content", 0) == 0:
                        data.add(e["data_file"]["file_path"])
    for key in ("statistics", "partition-statistics"):
        for s in md.get(key, []):
            out.add(s["statistics-path"])
    return {os.path.realpath(_local(p)) for p in (data if data_only else out)}


def ref_reach(md: dict[str, Any], *, data_only: bool = False) -> set[str]:
    """What the branches and tags of an undamaged ``md`` reach: no command may delete it."""
    heads = {r["snapshot-id"] for r in md.get("refs", {}).values()}
    return reachable({**md, "snapshots": [s for s in md["snapshots"] if s["snapshot-id"] in heads],
                      "statistics": [], "partition-statistics": []}, data_only=data_only)


def digest_tree(root: Path) -> dict[str, str]:
    """Relative path -> content digest (or link target) of everything below ``root``."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
                if name in dirnames:
                    dirnames.remove(name)  # never walk out of the tree through a link
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# --------------------------------------------------------------------------- the scene


@dataclass
class Scene:
    """One Spark-written table plus things around it, restorable to its pristine state."""

    table: Path
    outside: Path  # a sibling folder of another owner: nothing in it may ever change
    staging: Path  # Parquet files add-files registers (outside the table, as Spark allows)
    pristine: Path
    md: dict[str, Any]  # the undamaged current metadata
    version: int

    def restore(self) -> None:
        shutil.rmtree(self.table)
        shutil.copytree(self.pristine / "table", self.table, symlinks=True)
        shutil.rmtree(self.outside)
        shutil.copytree(self.pristine / "outside", self.outside, symlinks=True)

    def live_data_file(self, i: int) -> str:
        files = sorted(ref_reach(self.md, data_only=True))
        return files[i % len(files)]


def _current_version(table: Path) -> int:
    return int((table / "metadata" / "version-hint.text").read_text().strip())


def make_scene(src: Path, root: Path, *, to_v4: bool = False) -> Scene:
    if to_v4:  # icectl's own v4 layout: root manifests over the Spark-written manifests
        code, _out, err = run(["upgrade", str(src), "--to", "4", "--yes"])
        assert code == 0, err
    outside = root / "outside"
    (outside / "deep").mkdir(parents=True)
    for name in ("precious.parquet", "deep/v1.metadata.json", "deep/snap-1-1-x.avro"):
        (outside / name).write_bytes(f"not the table's: {name}".encode())
    version = _current_version(src)
    # An in-table link out of the table, and an in-table alias of the table's own data folder.
    (src / "data" / "escape").symlink_to(outside, target_is_directory=True)
    (src / "data_alias").symlink_to(src / "data", target_is_directory=True)
    pristine = root / "pristine"
    shutil.copytree(src, pristine / "table", symlinks=True)
    shutil.copytree(outside, pristine / "outside", symlinks=True)
    md = json.loads((src / "metadata" / f"v{version}.metadata.json").read_text())
    staging = root / "staging"
    staging.mkdir()
    scene = Scene(src, outside, staging, pristine, md, version)
    # One row of a live data file: a file in exactly one partition of any spec, with Spark's field ids.
    rows = pq.read_table(scene.live_data_file(0)).slice(0, 1)
    pq.write_table(rows, staging / "one-row.parquet")
    return scene


# --------------------------------------------------------------------------- damage

# Each damage edits the metadata dict in place and says whether Java (or the fence) must refuse it.
Damage = Callable[[dict[str, Any], Scene, int], bool]


def _ids(md: dict[str, Any]) -> list[int]:
    return [s["snapshot-id"] for s in md["snapshots"]]


def _oldest(md: dict[str, Any]) -> dict[str, Any]:
    return min(md["snapshots"], key=lambda s: (s["timestamp-ms"], s.get("sequence-number", 0)))


def dangling_branch(md: dict[str, Any], scene: Scene, n: int) -> bool:
    md.setdefault("refs", {})[f"ghost{n}"] = {"snapshot-id": max(_ids(md)) + 1 + n, "type": "branch"}
    return True


def dangling_current(md: dict[str, Any], scene: Scene, n: int) -> bool:
    ghost = max(_ids(md)) + 7 + n
    md["current-snapshot-id"] = ghost
    if "main" in md.get("refs", {}):
        md["refs"]["main"]["snapshot-id"] = ghost
    return True


def duplicate_snapshot(md: dict[str, Any], scene: Scene, n: int) -> bool:
    md["snapshots"].append(dict(md["snapshots"][n % len(md["snapshots"])]))
    return True


def parent_cycle(md: dict[str, Any], scene: Scene, n: int) -> bool:
    newest = max(md["snapshots"], key=lambda s: s["timestamp-ms"])
    _oldest(md)["parent-snapshot-id"] = newest["snapshot-id"]
    return True


def out_of_range(md: dict[str, Any], scene: Scene, n: int) -> bool:
    snap = md["snapshots"][n % len(md["snapshots"])]
    key, value = [("sequence-number", MAX_LONG + 1), ("sequence-number", -1), ("timestamp-ms", -5),
                  ("timestamp-ms", MAX_LONG + 1), ("snapshot-id", 2**64)][n % 5]
    if key == "sequence-number" and md["format-version"] == 1:
        key = "timestamp-ms"
    snap[key] = value
    return True


def foreign_location(md: dict[str, Any], scene: Scene, n: int) -> bool:
    # A parent folder (a widened fence) or a sibling (a copied table whose metadata names the original).
    md["location"] = str(scene.table.parent) if n % 2 == 0 else str(scene.table.parent / "the_original")
    return True


def _hostile_paths(scene: Scene, n: int) -> list[str]:
    live = scene.live_data_file(n)
    rel = os.path.relpath(live, scene.table / "data")
    ml = os.path.realpath(_local(next(s.get("manifest-list") or s["root-manifest"] for s in scene.md["snapshots"]
                                      if s["snapshot-id"] == scene.md["current-snapshot-id"])))
    return [live, "file:" + live, ml, str(scene.outside / "precious.parquet"),
            str(scene.outside / "deep" / "v1.metadata.json"),
            str(scene.table / "data" / "escape" / "deep" / "v1.metadata.json"),
            str(scene.table / "data" / "escape" / "precious.parquet"),
            str(scene.table / "data_alias" / rel), str(scene.table.parent / "elsewhere.metadata.json")]


def hostile_metadata_log(md: dict[str, Any], scene: Scene, n: int) -> bool:
    log = md.setdefault("metadata-log", [])
    paths = _hostile_paths(scene, n)
    log[:0] = [{"timestamp-ms": 1, "metadata-file": p} for p in paths]
    md["properties"]["write.metadata.delete-after-commit.enabled"] = "true"
    md["properties"]["write.metadata.previous-versions-max"] = str(1 + n % 2)
    return False


def hostile_statistics(md: dict[str, Any], scene: Scene, n: int) -> bool:
    # Statistics files of an expirable (old, unreferenced) snapshot are deleted with it.
    old = _oldest(md)["snapshot-id"]
    paths = _hostile_paths(scene, n)
    path = paths[n % len(paths)]
    md.setdefault("statistics", []).append({"snapshot-id": old, "statistics-path": path,
                                            "file-size-in-bytes": 10, "file-footer-size-in-bytes": 4,
                                            "blob-metadata": []})
    return False


REFUSED: list[Damage] = [dangling_branch, dangling_current, duplicate_snapshot, parent_cycle, out_of_range,
                         foreign_location]
HOSTILE: list[Damage] = [hostile_metadata_log, hostile_statistics]


def write_damaged(scene: Scene, damages: list[tuple[Damage, int]]) -> bool:
    """Commit the damaged metadata as the table's next version; True when Java would refuse it."""
    md = json.loads(json.dumps(scene.md))
    refused = False
    for damage, n in damages:
        refused |= damage(md, scene, n)
    meta = scene.table / "metadata"
    version = scene.version + 1
    (meta / f"v{version}.metadata.json").write_text(json.dumps(md))
    (meta / "version-hint.text").write_text(str(version))
    (meta / ".version-hint.text.crc").unlink(missing_ok=True)  # this harness, not Hadoop, wrote the hint
    return refused


# --------------------------------------------------------------------------- commands


def commands(scene: Scene) -> dict[str, list[str]]:
    t = str(scene.table)
    return {
        "expire": ["expire-snapshots", t, "--older-than", str(int(time.time() * 1000) + 60_000),
                   "--retain-last", "1"],
        "expire-dry": ["expire-snapshots", t, "--dry-run", "--older-than", str(int(time.time() * 1000))],
        "compact": ["compact", t, "--min-manifests", "1"],
        "add-files": ["add-files", t, str(scene.staging / "one-row.parquet")],
        "upgrade": ["upgrade", t, "--to", "3", "--yes"] if scene.md["format-version"] < 3
        else ["upgrade", t, "--to", "4", "--yes"] if scene.md["format-version"] == 3
        else ["remove-files", t, scene.live_data_file(1)],
    }


def run(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, [*args, "--json"], env={"ICECTL_CONFIG": "", "COLUMNS": "200"})
    return r.exit_code, r.stdout, r.stderr


def current_metadata(table: Path) -> dict[str, Any] | None:
    try:
        version = _current_version(table)
        return json.loads((table / "metadata" / f"v{version}.metadata.json").read_text())
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- the property


@pytest.fixture(scope="module", params=["v2_part", "v3_dv", "v4"])
def scene(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    kind = "v3_dv" if request.param == "v4" else request.param
    table = clone_table(spark, kind, f"hostile_{request.param}")
    yield make_scene(Path(table.location), tmp_path_factory.mktemp(f"hostile-{request.param}"),
                     to_v4=request.param == "v4")


# At most one damage Java refuses (else the first one found hides the others), plus hostile paths.
_damage_list = st.builds(
    lambda refused, hostile: refused + hostile,
    st.lists(st.tuples(st.sampled_from(REFUSED), st.integers(0, 40)), max_size=1),
    st.lists(st.tuples(st.sampled_from(HOSTILE), st.integers(0, 40)), max_size=2))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(damages=_damage_list, which=st.sampled_from(["expire", "expire-dry", "compact", "add-files", "upgrade"]))
def test_hostile_metadata_never_loses_a_file(scene: Scene, damages: list[tuple[Damage, int]], which: str) -> None:
    scene.restore()
    must_refuse = write_damaged(scene, damages)
    note(f"damages={[(d.__name__, n) for d, n in damages]} command={which}")
    protected = ref_reach(scene.md)
    damaged = current_metadata(scene.table)
    existed = {p for p in reachable(damaged or {}) if os.path.exists(p)}
    outside_before = digest_tree(scene.outside)
    table_before = digest_tree(scene.table)

    code, out, err = run(commands(scene)[which])
    note(f"exit={code} stderr={err.strip()[:500]}")
    event(f"{which}: exit {code} ({'must refuse' if must_refuse else 'loadable'})")
    if code == 0:
        json.loads(out)  # --json: one JSON document on stdout, nothing else

    assert code in DOCUMENTED, f"exit {code} is not a documented code: {err}"
    assert "Traceback" not in err
    assert digest_tree(scene.outside) == outside_before, "a file outside the table changed"
    missing = sorted(p for p in protected if not os.path.exists(p))
    assert not missing, f"{which} deleted files the table's branches and tags reach: {missing[:3]}"
    if must_refuse:
        assert code != 0, f"{which} accepted metadata Iceberg Java refuses to load"
    if code != 0 or which == "expire-dry":
        assert digest_tree(scene.table) == table_before, f"{which} failed (exit {code}) but changed the table"
        if code != 0:
            assert len(err.strip().splitlines()) == 1, f"not one line on stderr: {err}"
    else:
        after = current_metadata(scene.table)
        assert after is not None
        gone = sorted(p for p in reachable(after) & existed if not os.path.exists(p))
        assert not gone, f"{which} left the table referencing deleted files: {gone[:3]}"
