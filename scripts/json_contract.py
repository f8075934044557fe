#!/usr/bin/env python3
"""The CLI contract of issue 12: capture every command's --json output and written files, compare two captures.

Three steps (see ``--help`` of each):

* ``build --dir D``: real Spark writes the fixture tables once into ``D/warehouse`` (plus copies
  upgraded to v4 and Parquet files for add-files); the result is frozen in ``D/pristine.tar`` and
  the command list in ``D/cases.json``.
* ``capture --dir D --code TREE --out OUT``: every case starts from ``pristine.tar`` restored at the
  same absolute path, runs ``python -m icectl ... --json`` from ``TREE`` with ids and clocks made
  deterministic, and keeps stdout, stderr, the exit code and every file added or changed.
* ``compare A B``: both captures normalized the same way (ids, uuids, timestamps -> placeholders),
  then compared case by case; exit 1 on any difference.

Determinism in capture (the wrapper, before icectl is imported): uuid.uuid4 from a seeded
generator (``--seed``), os.urandom seeded (fastavro sync markers), time.time/time_ns a fixed clock
(cases.json ``clock_ms`` = 10 days after the build) advancing 1 ms per call, random.seed(0),
PYTHONHASHSEED=0, HOME empty, ICECTL_WAREHOUSE=D/warehouse, cwd D.

Normalization in compare (both sides alike, placeholders numbered in order of first appearance per
case, fed stdout -> stderr -> file paths -> file contents): UUID-shaped substrings -> <uuidN>;
integers >= 1e14 and 15-20 digit runs in strings (snapshot ids, also inside file names) -> <idN>;
epoch ms/us and ISO timestamps inside [build - 3 days, clock + 1 day], and ints > 1e12 under
timestamp keys -> <ts>; values under seconds/elapsed/duration keys -> <dur>; a length field
(manifest_length, file_size_in_bytes, bytes, ...) in a record that names a file the case wrote and
equal to that file's real size -> a placeholder (it varies with the byte length of ids inside).
Files: *.metadata.json parsed (gzip too); Avro decoded (header metadata + records, not bytes);
Puffin as blob bytes + footer JSON; anything else byte for byte. Added/changed/deleted path sets
are compared as sets.

Usage (issue 12): build --dir /work/contract; capture --code <old tree> --out before; capture
--code <new tree> --out after; compare before after.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TREE_ROOTS = ("warehouse", "staging")  # what pristine.tar holds, relative to D
FIXTURE_KINDS = ("v1_unpart", "v2_part", "v3_dv", "many_snaps")
# Copies built under another name (a cp -r copy would name the original's location) and upgraded.
V4_COPIES = {"v4_dv": "v3_dv", "v4_part": "v2_part"}
CLOCK_AFTER_BUILD_MS = 10 * 86_400_000  # the fake "now": 10 days after the build (past the 5-day default)

# --------------------------------------------------------------------------- the wrapper

# Runs in the subprocess: ids and clocks deterministic, then `python -m icectl` of whatever layout.
WRAPPER = r"""
import os, random, sys, time, uuid
_seed = int(os.environ["CONTRACT_SEED"])
_rng = random.Random(_seed)
def _uuid4():
    return uuid.UUID(int=_rng.getrandbits(128), version=4)
uuid.uuid4 = _uuid4
_bytes = random.Random(_seed + 1)
def _urandom(n):
    return _bytes.getrandbits(8 * n).to_bytes(n, "little") if n else b""
os.urandom = _urandom  # fastavro's sync markers (`from os import urandom` binds at import)
_now = [int(os.environ["CONTRACT_CLOCK_MS"]) * 1_000_000]
def _time_ns():
    _now[0] += 1_000_000
    return _now[0]
def _time():
    return _time_ns() / 1e9
time.time_ns = _time_ns
time.time = _time
random.seed(0)
import runpy
sys.argv = ["icectl"] + sys.argv[1:]
runpy.run_module("icectl", run_name="__main__", alter_sys=True)
"""


# --------------------------------------------------------------------------- build


def _icectl(code: Path, args: list[str], env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(code), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "icectl", *args], env=env, capture_output=True, text=True)


def _stage_parquet(table_dir: Path, kind: str) -> list[str]:
    """Write two Parquet files for add-files into ``<table>/staging/``, cut from the table's own data
    files (so types and field ids match), each inside one partition of the current spec."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    data = sorted((table_dir / "data").rglob("*.parquet"))
    if kind.startswith("v2") or kind == "v4_part":
        # The current schema has `note` and `quantity`; spec 1 is days(ts), category.
        picks = []
        for p in data:
            if not {"note", "quantity"} <= set(pq.read_schema(p).names):
                continue
            t = pq.read_table(p).sort_by("id")  # one file at a time: nullability differs between files
            days = pc.cast(pc.divide(pc.cast(t["ts"], pa.int64()), 86_400_000_000), pa.int64())
            for cat in ("red", "blue", "green"):
                mask = pc.and_(pc.equal(t["category"], cat), pc.equal(days, pc.min(days)))
                piece = t.filter(mask).slice(0, 3)
                if piece.num_rows and len(picks) < 2:
                    picks.append(piece)
    else:
        t = pa.concat_tables([pq.read_table(p) for p in data[:1]]).sort_by("id")
        picks = [t.slice(0, 4), t.slice(4, 3)]
    out_dir = table_dir / "staging"
    out_dir.mkdir(exist_ok=True)
    paths = []
    for i, piece in enumerate(picks):
        assert piece.num_rows > 0, (kind, i)
        path = out_dir / f"add-{i}.parquet"
        pq.write_table(piece, path)
        paths.append(str(path))
    return paths


def _cases(d: Path, tables: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every case: name, args (without --json, added by capture), optional prep."""
    cases: list[dict[str, Any]] = []

    def add(name: str, args: list[str], json_flag: bool = True, prep: list[Any] | None = None) -> None:
        cases.append({"name": name, "args": [*args, "--json"] if json_flag else args, "prep": prep or []})

    views = ["table", "schema", "snapshots", "history", "refs", "metadata-log", "manifests",
             "files", "entries", "partitions", "dvs", "tree"]
    for t, info in tables.items():
        path = info["path"]
        for v in views:
            add(f"inspect-{v}-{t}", ["inspect", v, path])
        add(f"inspect-manifests-all-{t}", ["inspect", "manifests", "--all", path])
        add(f"inspect-files-metrics-{t}", ["inspect", "files", "--metrics", path])
        add(f"inspect-entries-metrics-{t}", ["inspect", "entries", "--metrics", path])
        add(f"validate-{t}", ["validate", path])
        add(f"validate-deep-all-{t}", ["validate", "--all-snapshots", "--deep", path])
        for mode in ("dry", "real"):
            dry = ["--dry-run"] if mode == "dry" else []
            add(f"expire-default-{mode}-{t}", ["expire-snapshots", path, *dry])
            add(f"expire-1h-last1-{mode}-{t}", ["expire-snapshots", path, "--older-than", "1h",
                                                 "--retain-last", "1", *dry])
            add(f"expire-cleanmeta-{mode}-{t}", ["expire-snapshots", path, "--older-than", "1h",
                                                  "--retain-last", "2", "--clean-expired-metadata", *dry])
            add(f"compact-{mode}-{t}", ["compact", path, *dry])
            add(f"compact-min2-small-{mode}-{t}", ["compact", path, "--min-manifests", "2",
                                                    "--target-size", "4KiB", *dry])
            if info["version"] < 4:
                target = info["version"] + 1
                yes = ["--yes"] if target == 4 else []
                add(f"upgrade-to{target}-{mode}-{t}", ["upgrade", path, "--to", str(target), *yes, *dry])
            if info["version"] == 1:
                add(f"upgrade-to3-{mode}-{t}", ["upgrade", path, "--to", "3", *dry])
            if info.get("staged"):
                add(f"add-files-{mode}-{t}", ["add-files", path, *info["staged"], *dry])
                add(f"add-files-dir-branch-{mode}-{t}", ["add-files", path, str(Path(info["staged"][0]).parent),
                                                         "--branch", "newb", "--create-branch", *dry])
            if info["version"] == 4:
                if info.get("remove_path"):
                    add(f"remove-files-path-{mode}-{t}", ["remove-files", path, info["remove_path"], *dry])
                if info.get("remove_where"):
                    add(f"remove-files-where-{mode}-{t}", ["remove-files", path, "--where",
                                                           info["remove_where"], *dry])
    # add-files then compact / expire on the same table would need chaining; kept to one command per case.
    wh = str(d / "warehouse")
    add("list-db", ["list", "db"])
    add("list-all", ["list", "--all"])
    add("namespace-list", ["namespace", "list"])
    add("namespace-create", ["namespace", "create", "ns2"])
    add("namespace-create-exists", ["namespace", "create", "db"])
    add("namespace-create-exist-ok", ["namespace", "create", "db", "--exist-ok"])
    for mode in ("dry", "real"):
        dry = ["--dry-run"] if mode == "dry" else []
        add(f"create-v3-{mode}", ["create", "db.created3", "--schema",
                                  "id long not null, ts timestamptz, name string, tags list<string>",
                                  "--partition-by", "days(ts), bucket(16, id)", "--sort-by", "id desc",
                                  "--format-version", "3", "--property", "k=v", *dry])
        add(f"create-v2-dir-{mode}", ["create", f"{wh}/db/created_dir", "--schema",
                                      "a int, b string, c decimal(10,2), d date", "--partition-by",
                                      "truncate(4, b)", *dry])
        add(f"create-like-{mode}", ["create", "db.created_like", "--like", tables["v1_unpart"]["staged"][0],
                                    "--format-version", "1", *dry])
    add("create-exists", ["create", "db.v1_unpart", "--schema", "id long"])
    add("expire-all-real", ["expire-snapshots", "--all", "--older-than", "1h", "--retain-last", "1"])
    add("expire-all-dry", ["expire-snapshots", "--all", "--dry-run"])
    add("validate-list-rules", ["validate", "--list-rules"])
    add("inspect-table-by-name", ["inspect", "table", "db.v2_part"])
    add("inspect-files-ref-dev", ["inspect", "files", "--ref", "dev", tables["v2_part"]["path"]])
    add("inspect-files-tag", ["inspect", "files", "--ref", "after_merge", tables["v2_part"]["path"]])
    # Error cases: the stderr text and exit codes are part of the contract too.
    add("err-missing-table", ["inspect", "table", f"{wh}/db/nope"])
    add("err-missing-table-name", ["inspect", "table", "db.nope"])
    add("err-missing-table-nojson", ["inspect", "table", f"{wh}/db/nope"], json_flag=False)
    add("err-missing-snapshot", ["inspect", "files", "--snapshot", "1", tables["v2_part"]["path"]])
    add("err-upgrade-v4-no-yes", ["upgrade", tables["v3_dv"]["path"], "--to", "4"])
    add("err-remove-files-v3", ["remove-files", tables["v3_dv"]["path"], "--where", "region=eu"])
    v1 = tables["v1_unpart"]
    add("err-corrupt-metadata", ["inspect", "table", v1["path"]],
        prep=[["truncate", v1["current_metadata"], 40]])
    add("err-corrupt-metadata-validate", ["validate", v1["path"]],
        prep=[["truncate", v1["current_metadata"], 40]])
    add("err-corrupt-metadata-expire", ["expire-snapshots", v1["path"], "--older-than", "1h"],
        prep=[["write", v1["current_metadata"], "{\"format-version\": 9}"]])
    add("err-corrupt-metadata-nojson", ["inspect", "table", v1["path"]], json_flag=False,
        prep=[["truncate", v1["current_metadata"], 40]])
    return cases


def cmd_build(args: argparse.Namespace) -> int:
    d = Path(args.dir).resolve()
    code = Path(args.code).resolve()
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    spark_done = d / "spark-tables.json"  # a rerun after a later step failed keeps Spark's work
    sys.path.insert(0, str(REPO / "tests"))
    from support.spark import latest_metadata_path  # type: ignore[import-not-found]

    if spark_done.is_file():
        saved = json.loads(spark_done.read_text())
        tables, build_end_ms = saved["tables"], saved["build_end_ms"]
    else:
        if (d / "warehouse").exists():
            sys.exit(f"{d}/warehouse exists: build into a fresh directory")
        from support.fixtures import build_one  # type: ignore[import-not-found]
        from support.spark import timed_start_spark  # type: ignore[import-not-found]

        (d / "warehouse").mkdir()  # Hadoop catalog: SHOW NAMESPACES fails on a missing warehouse
        spark, secs = timed_start_spark(str(d / "warehouse"))
        print(f"spark up in {secs:.1f}s", flush=True)
        tables = {}
        for kind in FIXTURE_KINDS:
            ft = build_one(spark, kind)
            tables[kind] = {"path": str(ft.location), "version": ft.format_version, "kind": kind}
        for name, kind in V4_COPIES.items():
            ft = build_one(spark, kind, name)
            tables[name] = {"path": str(ft.location), "version": 4, "kind": kind}
        spark.stop()
        build_end_ms = int(time.time() * 1000)
        for name in V4_COPIES:
            r = _icectl(code, ["upgrade", tables[name]["path"], "--to", "4", "--yes", "--json"])
            print(f"upgrade {name} -> 4: exit {r.returncode} {r.stderr.strip()[:300]}", flush=True)
            if r.returncode != 0:
                del tables[name]
        spark_done.write_text(json.dumps({"tables": tables, "build_end_ms": build_end_ms}))
    for name, info in tables.items():
        if info["kind"] != "many_snaps":
            info["staged"] = _stage_parquet(Path(info["path"]), name)
        info["current_metadata"] = str(latest_metadata_path(info["path"]))
        if info["version"] == 4:
            r = _icectl(code, ["inspect", "files", "--content", "data", info["path"], "--json"])
            rows = json.loads(r.stdout)
            rows = rows if isinstance(rows, list) else next(v for v in rows.values() if isinstance(v, list))
            info["remove_path"] = sorted(row["file_path"] for row in rows)[0]
            info["remove_where"] = "category=red" if info["kind"] == "v2_part" else "region=us"
    (d / "staging").mkdir(exist_ok=True)
    with tarfile.open(d / "pristine.tar", "w") as tar:
        for root in TREE_ROOTS:
            tar.add(d / root, arcname=root)
    cases = _cases(d, tables)
    doc = {"dir": str(d), "clock_ms": build_end_ms + CLOCK_AFTER_BUILD_MS, "build_end_ms": build_end_ms,
           "tables": tables, "cases": cases}
    (d / "cases.json").write_text(json.dumps(doc, indent=1))
    print(f"built {len(tables)} tables, {len(cases)} cases in {time.time() - t0:.0f}s", flush=True)
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    """Regenerate cases.json from the recorded tables (after editing the case list)."""
    d = Path(args.dir).resolve()
    doc = json.loads((d / "cases.json").read_text())
    doc["cases"] = _cases(d, doc["tables"])
    (d / "cases.json").write_text(json.dumps(doc, indent=1))
    print(f"{len(doc['cases'])} cases")
    return 0


# --------------------------------------------------------------------------- capture


def _restore(d: Path) -> None:
    for root in TREE_ROOTS:
        shutil.rmtree(d / root, ignore_errors=True)
    with tarfile.open(d / "pristine.tar") as tar:
        tar.extractall(d, filter="tar")


def _tree(d: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for root in TREE_ROOTS:
        for dirpath, dirs, files in os.walk(d / root):
            for sub in dirs:  # an empty directory is a namespace in a file-system warehouse
                out[str((Path(dirpath) / sub).relative_to(d)) + "/"] = "dir"
            for f in files:
                p = Path(dirpath) / f
                out[str(p.relative_to(d))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _prep(step: list[Any]) -> None:
    op, path = step[0], Path(step[1])
    if op == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(int(step[2]))
    elif op == "write":
        path.write_text(step[2])
    else:
        raise ValueError(f"unknown prep step {op}")


def cmd_capture(args: argparse.Namespace) -> int:
    d = Path(args.dir).resolve()
    code = Path(args.code).resolve()
    out = Path(args.out).resolve()
    doc = json.loads((d / "cases.json").read_text())
    cases = doc["cases"]
    if args.only:
        cases = [c for c in cases if re.search(args.only, c["name"])]
    out.mkdir(parents=True, exist_ok=True)
    home = d / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICECTL_")}
    env.update({
        "PYTHONPATH": str(code),
        "PYTHONHASHSEED": "0",
        "HOME": str(home),  # no ~/.config/icectl/config.toml
        "ICECTL_WAREHOUSE": str(d / "warehouse"),
        "CONTRACT_SEED": str(args.seed),
        "CONTRACT_CLOCK_MS": str(doc["clock_ms"] + args.clock_shift_ms),
        "COLUMNS": "200",
        "TZ": "UTC",
    })
    t0 = time.time()
    for case in cases:
        name = case["name"]
        _restore(d)
        for step in case["prep"]:
            _prep(step)
        before = _tree(d)
        t1 = time.time()
        r = subprocess.run([sys.executable, "-c", WRAPPER, *case["args"]], cwd=d, env=env,
                           capture_output=True, stdin=subprocess.DEVNULL)
        secs = time.time() - t1
        after = _tree(d)
        cdir = out / name
        shutil.rmtree(cdir, ignore_errors=True)
        (cdir / "files").mkdir(parents=True)
        added = sorted(set(after) - set(before))
        deleted = sorted(set(before) - set(after))
        changed = sorted(p for p in set(after) & set(before) if after[p] != before[p])
        for rel in added + changed:
            dst = cdir / "files" / rel
            if rel.endswith("/"):
                dst.mkdir(parents=True, exist_ok=True)
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(d / rel, dst)
        (cdir / "stdout").write_bytes(r.stdout)
        (cdir / "stderr").write_bytes(r.stderr)
        (cdir / "result.json").write_text(json.dumps({
            "args": case["args"], "prep": case["prep"], "exit": r.returncode,
            "added": added, "changed": changed, "deleted": deleted, "seconds": round(secs, 2)}, indent=1))
        print(f"{name}: exit {r.returncode}, +{len(added)} ~{len(changed)} -{len(deleted)} ({secs:.1f}s)",
              flush=True)
    _restore(d)
    (out / "capture.json").write_text(json.dumps({
        "code": str(code), "cases": [c["name"] for c in cases], "seconds": round(time.time() - t0, 1),
        "seed": args.seed, "clock_shift_ms": args.clock_shift_ms}, indent=1))
    print(f"captured {len(cases)} cases in {time.time() - t0:.0f}s")
    return 0


# --------------------------------------------------------------------------- normalization

_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Snapshot ids are random positive 63-bit numbers: 15+ digits, never a count or a size here.
_BIGINT_RE = re.compile(r"(?<![0-9])[0-9]{15,20}(?![0-9])")
_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_DURATION_KEYS = re.compile(r"(^|_)(seconds|secs|elapsed|duration)(_|$)|_s$")
# Length fields checked against the file they name when this case wrote it (else compared as numbers).
_SIZE_KEYS = frozenset({"manifest_length", "file_size_in_bytes", "bytes", "size", "length", "bytes_out",
                        "file-size-in-bytes", "manifest-length"})
_TS_KEYS = re.compile(r"(timestamp[-_]ms|last-updated-ms|timestamp_ms|committed_at|made_current_at)$")


class Normalizer:
    """Maps ids and uuids to placeholders in order of first appearance; timestamps near the build
    (epoch ms, µs, ISO text) to ``<ts>``. One instance per case and side, fed in a fixed order."""

    def __init__(self, ts_lo_ms: int, ts_hi_ms: int, written: dict[str, int] | None = None) -> None:
        self.ids: dict[str, str] = {}
        self.lo, self.hi = ts_lo_ms, ts_hi_ms
        # absolute path -> size of each file this case wrote: a record naming one of them may give
        # its length, which varies with the byte length of the ids inside (Avro varints, JSON digits).
        self.written = written or {}

    def _id(self, raw: str, kind: str) -> str:
        key = raw.lower()
        if key not in self.ids:
            self.ids[key] = f"<{kind}{sum(1 for v in self.ids.values() if v.startswith('<' + kind)) + 1}>"
        return self.ids[key]

    def _is_ts(self, n: int) -> bool:
        return self.lo <= n <= self.hi or self.lo * 1000 <= n <= self.hi * 1000

    def _iso_is_ts(self, text: str) -> bool:
        import datetime

        try:
            dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
        except ValueError:
            return False
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=datetime.timezone.utc)
        return self.lo <= dt.timestamp() * 1000 <= self.hi

    def text(self, s: str) -> str:
        s = _UUID_RE.sub(lambda m: self._id(m.group(0), "uuid"), s)
        s = _ISO_RE.sub(lambda m: "<ts>" if self._iso_is_ts(m.group(0)) else m.group(0), s)

        def big(m: re.Match[str]) -> str:
            n = int(m.group(0))
            if self._is_ts(n):
                return "<ts>"
            return self._id(m.group(0), "id")

        s = _BIGINT_RE.sub(big, s)
        return re.sub(r"(?<![0-9])1[5-9][0-9]{11}(?![0-9])",
                      lambda m: "<ts>" if self._is_ts(int(m.group(0))) else m.group(0), s)

    def value(self, v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            sizes = {self.written[x] for x in v.values() if isinstance(x, str) and x in self.written}
            return {self.text(str(k)): "<length of the written file>"
                    if str(k) in _SIZE_KEYS and isinstance(x, int) and x in sizes
                    else self.value(x, str(k)) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [self.value(x, key) for x in v]
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, float) and _DURATION_KEYS.search(key):
            return "<dur>"
        if isinstance(v, int):
            if _DURATION_KEYS.search(key):
                return "<dur>"
            if self._is_ts(v) or (_TS_KEYS.search(key) and v > 10**12):
                return "<ts>"
            if abs(v) >= 10**14:
                return self._id(str(v), "id")
            return v
        if isinstance(v, bytes):
            return "0x" + v.hex()
        if isinstance(v, str):
            return self.text(v)
        return v


def _parse_json_text(raw: bytes) -> tuple[str, Any]:
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return "empty", None
    try:
        return "json", json.loads(text)
    except ValueError:
        pass
    try:
        return "jsonl", [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return "text", text


def _avro(path: Path) -> Any:
    import fastavro

    with open(path, "rb") as fh:
        try:
            reader = fastavro.reader(fh)
            meta = {}
            for k, v in reader.metadata.items():
                v = v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
                try:
                    meta[k] = json.loads(v)
                except (ValueError, TypeError):
                    meta[k] = v
            records = list(reader)
        except Exception as e:
            return {"unreadable-avro": f"{type(e).__name__}: {e}"}
    return {"avro-metadata": meta, "records": records}


def _puffin(raw: bytes) -> Any:
    # PFA1 <blobs> PFA1 <footer payload> <len u32 LE> <flags 4 bytes> PFA1
    try:
        if raw[:4] != b"PFA1" or raw[-4:] != b"PFA1":
            raise ValueError("no magic")
        (length,) = struct.unpack_from("<I", raw, len(raw) - 12)
        flags = raw[-8:-4]
        payload = raw[len(raw) - 12 - length: len(raw) - 12]
        footer_start = len(raw) - 12 - length - 4
        footer = json.loads(payload) if flags[0] & 1 == 0 else "0x" + payload.hex()
        return {"blobs": raw[4:footer_start], "flags": flags, "footer": footer}
    except (ValueError, struct.error):
        return {"raw": raw}


def _file_doc(path: Path) -> Any:
    if path.is_dir():
        return {"directory": True}
    raw = path.read_bytes()
    name = path.name
    if name.endswith(".avro") or raw[:4] == b"Obj\x01":
        return _avro(path)
    if name.endswith(".puffin"):
        return _puffin(raw)
    if raw[:2] == b"\x1f\x8b" and name.endswith(".json"):
        raw = gzip.decompress(raw)
    if name.endswith(".json"):
        try:
            return {"json": json.loads(raw)}
        except ValueError:
            pass
    return {"raw-sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)} if len(raw) > 4096 else \
        {"raw": raw}


def _generic(path: str) -> str:
    return _BIGINT_RE.sub("#", _UUID_RE.sub("#", path))


def normalized_case(cdir: Path, lo: int, hi: int, base: str | None = None) -> dict[str, Any]:
    """One side of one case, normalized; the order fed to the normalizer is fixed (stdout, stderr,
    paths in id-blind order, file contents in that order) so both sides get the same placeholders.
    ``base``: the directory D the capture ran in (paths in the documents are absolute)."""
    res = json.loads((cdir / "result.json").read_text())
    written: dict[str, int] = {}
    if base:
        for rel in res["added"] + res["changed"]:
            f = cdir / "files" / rel
            if f.is_file():
                written[f"{base}/{rel}"] = written[f"file:{base}/{rel}"] = f.stat().st_size
    n = Normalizer(lo, hi, written)
    kind, out = _parse_json_text((cdir / "stdout").read_bytes())
    doc: dict[str, Any] = {"exit": res["exit"], "stdout": {kind: n.value(out)}}
    doc["stderr"] = n.text((cdir / "stderr").read_bytes().decode("utf-8", errors="replace"))
    files: dict[str, Any] = {}
    for group in ("added", "changed", "deleted"):
        paths = sorted(res[group], key=lambda p: (_generic(p), p))
        doc[group] = [n.text(p) for p in paths]
        if group != "deleted":
            for p in paths:
                files[n.text(p)] = n.value(_file_doc(cdir / "files" / p))
    doc["files"] = files
    return doc


def _diff(a: Any, b: Any, where: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            if k not in a:
                out.append(f"{where}.{k}: only in B: {_short(b[k])}")
            elif k not in b:
                out.append(f"{where}.{k}: only in A: {_short(a[k])}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out, limit)
            if len(out) >= limit:
                return
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{where}[{i}]", out, limit)
            if len(out) >= limit:
                return
    elif isinstance(a, str) and isinstance(b, str) and "\n" in a + b and a != b:
        la, lb = a.splitlines(), b.splitlines()
        for i in range(max(len(la), len(lb))):
            x = la[i] if i < len(la) else "<none>"
            y = lb[i] if i < len(lb) else "<none>"
            if x != y:
                out.append(f"{where} line {i + 1}: A {x[:200]!r} != B {y[:200]!r}")
                return
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: A {_short(a)} != B {_short(b)}")


def _short(v: Any) -> str:
    s = json.dumps(v, default=str, sort_keys=True)
    return s if len(s) <= 240 else s[:240] + "..."


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = Path(args.a), Path(args.b)
    cases_a = json.loads((a / "capture.json").read_text())["cases"]
    cases_b = json.loads((b / "capture.json").read_text())["cases"]
    # Timestamps worth normalizing: from a day before the fixtures to a day after the fake clock.
    doc = json.loads(Path(args.cases).read_text()) if args.cases else None
    if doc is not None:
        lo, hi = doc["build_end_ms"] - 3 * 86_400_000, doc["clock_ms"] + 86_400_000
        base = doc["dir"]
    else:
        lo, hi = 1_500_000_000_000, 2_500_000_000_000
        base = None
    if args.only:
        cases_a = [c for c in cases_a if re.search(args.only, c)]
        cases_b = [c for c in cases_b if re.search(args.only, c)]
    bad = 0
    for name in [*cases_a, *[c for c in cases_b if c not in cases_a]]:
        if name not in cases_a or name not in cases_b:
            print(f"{name}: MISSING in {'A' if name not in cases_a else 'B'}")
            bad += 1
            continue
        da = normalized_case(a / name, lo, hi, base)
        db = normalized_case(b / name, lo, hi, base)
        diffs: list[str] = []
        for group in ("added", "changed", "deleted"):  # file sets: report as sets, not shifted lists
            ga, gb = da.pop(group), db.pop(group)
            if ga != gb:
                only_a, only_b = sorted(set(ga) - set(gb)), sorted(set(gb) - set(ga))
                diffs.append(f".{group}: {len(ga)} vs {len(gb)} files; only in A: {_short(only_a)}; "
                             f"only in B: {_short(only_b)}" if only_a or only_b else f".{group}: order differs")
        _diff(da, db, "", diffs, args.max_diffs)
        if diffs:
            bad += 1
            print(f"{name}: DIFFERENT")
            for line in diffs:
                print(f"    {line}")
        elif not args.quiet:
            print(f"{name}: OK")
    total = len(set(cases_a) | set(cases_b))
    print(f"{total - bad}/{total} cases OK" + (f", {bad} DIFFERENT" if bad else ""))
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the Spark fixtures once into D, tar them, write D/cases.json")
    b.add_argument("--dir", required=True)
    b.add_argument("--code", default=str(REPO), help="icectl tree used for the v4 upgrades (default: this one)")
    b.set_defaults(func=cmd_build)
    cs = sub.add_parser("cases", help="rewrite D/cases.json's case list from its recorded tables")
    cs.add_argument("--dir", required=True)
    cs.set_defaults(func=cmd_cases)
    c = sub.add_parser("capture", help="run every case against the icectl in TREE")
    c.add_argument("--dir", required=True)
    c.add_argument("--code", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int, default=12, help="seed of the fake uuid4/urandom")
    c.add_argument("--clock-shift-ms", type=int, default=0,
                   help="move the fake clock (to check that compare ignores timestamps)")
    c.add_argument("--only", help="regex: only the cases whose name matches")
    c.set_defaults(func=cmd_capture)
    k = sub.add_parser("compare", help="compare two captures; exit 1 on any difference")
    k.add_argument("a")
    k.add_argument("b")
    k.add_argument("--cases", help="D/cases.json: narrows the timestamp window (default: A's sibling)")
    k.add_argument("--max-diffs", type=int, default=8)
    k.add_argument("--only", help="regex: only the cases whose name matches")
    k.add_argument("--quiet", action="store_true", help="print only the differing cases")
    k.set_defaults(func=cmd_compare)
    args = p.parse_args()
    if args.cmd == "compare" and not args.cases:
        guess = Path(args.a).resolve().parent / "cases.json"
        args.cases = str(guess) if guess.is_file() else None
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
