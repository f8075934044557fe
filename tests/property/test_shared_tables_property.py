"""Property (issue 27): no delete crosses into another table, nor out of every table.

Each example builds a warehouse (the Hadoop catalog ``local``) of folder tables of one-file
appends (:func:`support.appends.build_appends`, no Spark), with random twists:

* twins: SQLite catalog entries (``sq``) registered at a table's metadata (they share every file);
* a nested table inside the first table's folder (``t0/nested``), sometimes registered too;
* an overlapping ``write.data.path``: a table whose data files live in the first table's ``data/``;
* relative paths: an append whose manifest names its file ``data/<name>`` (invalid before v4),
  with a same-named bait file in the working directory;
* planted orphans; every file 10 days old.

Then expire-snapshots, remove-orphan-files and drop --purge (sometimes with --allow-shared) run on
random entries. After each command: every file another entry reaches (read with json and fastavro,
:mod:`support.reach`; entries the command's --allow-shared named excepted) still exists, and so does
every file outside every table. Whether a command is refused (exit 4 or 6) does not matter here.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from support.appends import build_appends
from support.reach import files_under, physical, reach, table_reach
from typer.testing import CliRunner

from icectl.cli.app import app

DAY_MS = 86_400_000
EXAMPLES = int(os.environ.get("ICECTL_SHARED_PROPERTY_EXAMPLES", "6" if os.environ.get("CI") else "20"))


@dataclass(frozen=True)
class Plan:
    appends: tuple[int, ...]  # per folder table t0, t1, ...
    nested: int  # appends of t0/nested (0: none)
    nested_registered: bool
    data_in_t0: bool  # t1's data files live in t0/data (write.data.path)
    relative: tuple[tuple[int, int], ...]  # (table, append) named by a relative path
    twins: tuple[int, ...]  # a SQLite entry per item, at that table's metadata
    orphans: int
    ops: tuple[tuple[str, int, bool], ...]  # (command, entry index, --allow-shared the first sharer)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(2, 3))
    appends = tuple(draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)))
    nested = draw(st.sampled_from([0, 0, 1, 2]))
    relative = tuple(sorted(set(draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 3)), max_size=2)))))
    relative = tuple((t, a) for t, a in relative if a < appends[t])
    twins = tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3)))
    entries = n + len(twins) + (1 if nested else 0)
    ops = tuple(draw(st.lists(st.tuples(st.sampled_from(["expire", "orphans", "drop"]), st.integers(0, entries - 1),
                                        st.booleans()), min_size=1, max_size=4)))
    return Plan(appends, nested, draw(st.booleans()) and nested > 0, draw(st.booleans()), relative, twins,
                draw(st.integers(0, 2)), ops)


def _age(root: Path) -> None:
    when = time.time() - 10 * 86_400
    for folder, _dirs, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(folder, n), (when, when))


def _run(config: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["--config", str(config), *args], env={"ICECTL_WAREHOUSE": "", "ICECTL_CONFIG": ""})
    return r.exit_code, r.stdout + r.stderr


@dataclass
class Entry:
    name: str  # how commands address it
    aliases: tuple[str, ...]  # what --allow-shared may call it
    folder: Path | None  # a folder table: its directory
    sql_pointer: tuple[Path, str] | None = None  # a SQLite entry: (database, full name)
    dropped: bool = False

    def metadata(self) -> str | None:
        """Its current metadata file (None when gone)."""
        if self.folder is not None:
            meta = self.folder / "metadata"
            if not (meta / "version-hint.text").exists():
                return None
            return str(meta / f"v{int((meta / 'version-hint.text').read_text().strip())}.metadata.json")
        import sqlite3

        assert self.sql_pointer is not None
        db, full = self.sql_pointer
        ns, _, table = full.rpartition(".")
        with sqlite3.connect(db) as c:
            rows = c.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND "
                             "table_name = ?", (ns.split(".", 1)[1], table)).fetchall()
        return rows[0][0] if rows else None

    def reach(self) -> set[str]:
        md = self.metadata()
        if md is None or not os.path.exists(physical(md)):
            return set()
        return table_reach(self.folder) if self.folder is not None else reach(md)


def _build(plan: Plan, root: Path) -> tuple[Path, list[Entry], Path]:
    wh, bait = root / "wh", root / "cwd"
    (bait / "data").mkdir(parents=True)
    config = root / "icectl.toml"
    config.write_text(f'default-catalog = "local"\n[catalog.local]\ntype = "hadoop"\nwarehouse = "{wh}"\n'
                      f'[catalog.sq]\ntype = "sql"\nuri = "{root / "sq.db"}"\nwarehouse = "{root / "sqwh"}"\n')
    entries: list[Entry] = []
    for i, n in enumerate(plan.appends):
        d = wh / "db" / f"t{i}"
        extra: dict[str, str] = {}
        data_dir = None
        if i == 1 and plan.data_in_t0:
            data_dir = wh / "db" / "t0" / "data"
            extra["write.data.path"] = str(data_dir)
        build_appends(d, n, step_ms=DAY_MS, properties=extra or None, data_dir=data_dir,
                      relative=[a for t, a in plan.relative if t == i])
        entries.append(Entry(f"db.t{i}", (f"local.db.t{i}", f"db.t{i}", str(d)), d))
    for path in (wh / "db").rglob("*.parquet"):  # the bait a relative path names from the working directory
        (bait / "data" / path.name).write_bytes(b"bait")
    if plan.nested:
        d = wh / "db" / "t0" / "nested"
        build_appends(d, plan.nested, step_ms=DAY_MS)
        entries.append(Entry(str(d), (str(d),), d))
        if plan.nested_registered:
            md = entries[-1].metadata()
            assert md is not None
            code, out = _run(config, "register", "sq.db.nested", md)
            assert code == 0, out
            entries.append(Entry("sq.db.nested", ("sq.db.nested",), None, (root / "sq.db", "sq.db.nested")))
    for k, t in enumerate(plan.twins):
        md = entries[t].metadata()
        assert md is not None
        code, out = _run(config, "register", f"sq.db.twin{k}", md)
        assert code == 0, out
        entries.append(Entry(f"sq.db.twin{k}", (f"sq.db.twin{k}",), None, (root / "sq.db", f"sq.db.twin{k}")))
    for k in range(plan.orphans):
        p = wh / "db" / f"t{k % len(plan.appends)}" / "data" / f"orphan-{k}.parquet"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"orphan")
    _age(root)
    return config, entries, bait


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans())
def test_no_delete_crosses_into_another_table_or_out_of_every_table(plan: Plan) -> None:
    note(repr(plan))
    with tempfile.TemporaryDirectory(prefix="icectl-shared-") as tmp:
        root = Path(tmp).resolve()
        config, entries, bait = _build(plan, root)
        outside = files_under(bait)
        cwd = os.getcwd()
        os.chdir(bait)  # a relative path read against the working directory names the bait
        try:
            for command, index, allow in plan.ops:
                target = entries[index % len(entries)]
                if target.dropped or target.metadata() is None:
                    continue
                others = [e for e in entries if e is not target and not e.dropped]
                reached = {e.name: e.reach() for e in others}
                shared = [e for e in others if reached[e.name] & target.reach()]
                allowed = [shared[0]] if allow and shared and command == "drop" else []
                protected = set().union(*(r for n, r in reached.items() if n not in {a.name for a in allowed}))
                existed = {p for p in protected if os.path.exists(p)}
                if command == "expire":
                    args = ["expire-snapshots", target.name, "--older-than", str(int(time.time() * 1000)),
                            "--retain-last", "1", "--json"]
                elif command == "orphans":
                    args = ["remove-orphan-files", target.name, "--json"]
                else:
                    args = ["drop", target.name, "--purge", "--json",
                            *[x for a in allowed for x in ("--allow-shared", a.aliases[0])]]
                code, out = _run(config, *args)
                note(f"{' '.join(args)} -> {code}: {out[:300]}")
                if os.environ.get("ICECTL_SHARED_PROPERTY_DEBUG"):
                    print(f"{args[:2]} -> {code}: {out[:200]!r}")
                assert code in (0, 4, 6), out
                if command == "drop" and code == 0:
                    target.dropped = True
                    for a in allowed:
                        a.dropped = True  # the user said it may break
                gone = sorted(p for p in existed if not os.path.exists(p))
                assert not gone, f"{args}: deleted files other tables reach: {gone[:5]}"
                assert files_under(bait) == outside, f"{args}: deleted files outside every table"
        finally:
            os.chdir(cwd)
