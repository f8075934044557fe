"""Issue 29's acceptance: an independent reader written from the merged v4 spec
(``support/v4_reader.py``: pyarrow by Parquet field id, its own Mumbling decoder, no icectl code)
reads every v4 table icectl writes, after the upgrade, appends, removals (manifest DVs on
carried-over and on Parquet leaves), compaction and expiry, and finds the same live rows as Spark
read from the v3 table before the upgrade (rows by Spark's ``_file``/``_pos``, adjusted for what
each step added or removed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.fixtures import FixtureTable
from support.spark import latest_metadata_json
from support.v4_reader import live_data_files, live_rows, local
from typer.testing import CliRunner

from icectl.cli.app import app

pytestmark = pytest.mark.spark

Row = tuple[str, int]  # (data file, position)


def icectl(*args: str, expect: int = 0) -> dict[str, Any]:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == expect, r.stderr
    return json.loads(r.stdout) if r.stdout.strip() else {}


def _metadata_json(t: FixtureTable) -> str:
    hint = Path(t.location) / "metadata" / "version-hint.text"
    return str(Path(t.location) / "metadata" / f"v{hint.read_text().strip()}.metadata.json")


def reader_rows(t: FixtureTable) -> set[Row]:
    """The live (file, position) pairs as the independent reader finds them."""
    out = set()
    for path, deleted in live_data_files(_metadata_json(t)).items():
        n = pq.read_metadata(local(path)).num_rows
        out |= {(path, i) for i in range(n) if i not in deleted}
    return out


def spark_rows(spark: Any, t: FixtureTable) -> dict[Row, int]:
    """Spark's live rows of the table: (file, position) -> id."""
    got = spark.sql(f"SELECT _file, _pos, id FROM {t.name}").collect()
    return {(local(r[0]), int(r[1])): int(r[2]) for r in got}


def _root_is_parquet(t: FixtureTable) -> None:
    md = latest_metadata_json(t.location)
    head = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    assert md["format-version"] == 4 and Path(local(head["root-manifest"])).read_bytes()[:4] == b"PAR1"


def _template(t: FixtureTable, files: list[str]) -> pa.Table:
    """Rows of one Spark-written file that share the values of every source column of the table's
    current partition spec (so they fall in one partition whatever its transforms): up to three."""
    md = latest_metadata_json(t.location)
    spec = next(s for s in md["partition-specs"] if s["spec-id"] == md["default-spec-id"])
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    names = {f["id"]: f["name"] for f in schema["fields"]}
    sources = [names[f["source-id"]] for f in spec["fields"]]
    for path in sorted(files):
        table = pq.read_table(local(path))
        keys = list(zip(*(table.column(c).to_pylist() for c in sources), strict=True)) if sources else \
            [()] * table.num_rows
        for key in dict.fromkeys(keys):
            rows = [i for i, k in enumerate(keys) if k == key]
            if len(rows) >= 3 or not sources:
                return table.take(rows[:3])
    path = sorted(files)[0]
    return pq.read_table(local(path)).slice(0, 1)


def _new_file(template: pa.Table, target: Path, rows: int) -> str:
    """``rows`` rows of the template as a new data file."""
    pq.write_table(template.slice(0, rows), target)
    return str(target)


def _ids(path: str) -> list[int]:
    return [int(i) for i in pq.read_table(local(path), columns=["id"]).column("id").to_pylist()]


def _same_as_icectl(t: FixtureTable, expected: set[Row]) -> None:
    """icectl's own view of the live data files agrees with the reader's (a file whose rows are all
    deleted is still live), and every file with an expected row is among them."""
    files = {local(r["file_path"]) for r in icectl("inspect", "files", str(t.location), "--content", "data")["rows"]}
    assert files == set(live_data_files(_metadata_json(t))) >= {f for f, _ in expected}


@pytest.mark.parametrize("kind", ["v3_dv", "v2_part"])
def test_the_independent_reader_reads_every_v4_table_icectl_writes(
        spark: Any, spark_clone: Callable[..., FixtureTable], kind: str) -> None:
    t = spark_clone(kind)
    before = spark_rows(spark, t)
    assert reader_rows(t) == set(before)  # the reader agrees with Spark on the v2/v3 table already
    deleted_before = live_data_files(_metadata_json(t))
    with_deletes = sorted(f for f, d in deleted_before.items() if d)  # files Spark deleted rows from
    template = _template(t, list(deleted_before))
    folder = Path(t.location) / "data"

    icectl("upgrade", str(t.location), "--to", "4", "--yes")
    _root_is_parquet(t)
    expected = set(before)
    assert reader_rows(t) == expected
    _same_as_icectl(t, expected)

    # Appends: a few files go into the root, more than write.v4.root-max-added-files into a new Parquet leaf.
    icectl("properties", "set", str(t.location), "write.v4.root-max-added-files=10")
    small = [_new_file(template, folder / f"added-{i}.parquet", template.num_rows) for i in range(2)]
    icectl("add-files", str(t.location), *small)
    many = [_new_file(template, folder / f"bulk-{i}.parquet", 1) for i in range(25)]
    icectl("add-files", str(t.location), *many)
    expected |= {(p, i) for p in small for i in range(template.num_rows)} | {(p, 0) for p in many}
    assert reader_rows(t) == expected

    # Removals: a Spark-written file (a manifest DV on a carried-over v2/v3 manifest, and its DV
    # with it), a root-level file (a DELETED row) and a file of the new leaf (a Parquet leaf's manifest DV).
    spark_file = (with_deletes or sorted({f for f, _ in before}))[-1]
    icectl("remove-files", str(t.location), spark_file, small[0], many[3])
    expected = {(f, i) for f, i in expected if f not in (spark_file, small[0], many[3])}
    assert reader_rows(t) == expected
    _same_as_icectl(t, expected)
    tree = icectl("inspect", "tree", str(t.location))
    assert tree["by_type_and_status"].get("DATA_MANIFEST/MODIFIED", 0) >= 2  # the leaves that lost a row

    # Compaction: manifest DVs applied, root files flushed, leaves merged into Parquet leaves.
    icectl("compact", str(t.location), "--target-size", "256KiB")
    _root_is_parquet(t)
    assert reader_rows(t) == expected
    # Expiry keeps exactly what the head reaches.
    icectl("expire-snapshots", str(t.location), "--older-than", "0s", "--retain-last", "1")
    assert reader_rows(t) == expected
    _same_as_icectl(t, expected)
    assert icectl("validate", str(t.location), "--deep")["errors"] == 0

    # The rows themselves: every id Spark read before, less the removed files', plus the added ones.
    ids = sorted(live_rows(_metadata_json(t)).column("id").to_pylist())
    want = sorted([i for (f, _p), i in before.items() if f != spark_file]
                  + [i for p in [small[1], *many[:3], *many[4:]] for i in _ids(p)])
    assert ids == want
