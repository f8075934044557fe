"""Every command's --json output on small tables built with icectl itself (issue 12's typed results).

``scenarios(tmp)`` runs the commands and returns ``{name: {"exit_code", "json", "stderr"[, "text"]}}``:
the document (a list of them, one per stdout line, for ``--all``; None when the command failed),
and for read-only commands the terminal view too. ``normalize`` replaces what differs between runs
(paths of the temp dir, ids, uuids, times, sizes of Avro files) so two runs compare value for value.

Run as a script to record a baseline: ``PYTHONPATH=. python tests/support/json_contract.py OUT.json``
(tests/cli/data/json_contract_before.json was recorded so, with the code before typed results).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from icectl.cli.app import app


def _run(wh: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""},
                           input="")
    return r.exit_code, r.stdout, r.stderr


def _parquet(path: Path, ids: list[int], cat: str) -> str:
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "cat": pa.array([cat] * len(ids)),
                             "amount": pa.array([float(i) for i in ids])}), path)
    return str(path)


_READ_ONLY = ("inspect", "validate", "list", "dry_run", "nothing")


def scenarios(tmp: Path) -> dict[str, Any]:
    wh = tmp / "wh"
    files = tmp / "files"
    files.mkdir(parents=True)
    out: dict[str, Any] = {}

    def run(name: str, *args: str, lines: bool = False) -> None:
        code, stdout, stderr = _run(wh, *args, "--json")
        docs = ([json.loads(line) for line in stdout.splitlines() if line.strip()] if lines
                else json.loads(stdout) if stdout.strip() else None)  # None: an error (exit code, stderr)
        out[name] = {"exit_code": code, "json": docs, "stderr": stderr}
        if any(w in name for w in _READ_ONLY):  # the terminal view too (the same command without --json)
            out[name]["text"] = _run(wh, *args)[1]

    def call(*args: str) -> None:
        code, _, stderr = _run(wh, *args)
        assert code == 0, (args, stderr)

    run("namespace_create", "namespace", "create", "db")
    run("create_dry_run", "create", "db.t", "--schema", "id long not null, cat string, amount double",
        "--dry-run")
    run("create", "create", "db.t", "--schema", "id long not null, cat string, amount double",
        "--property", "write.format.default=parquet")
    run("create_partitioned", "create", "db.p", "--schema", "id long, cat string, amount double",
        "--partition-by", "cat", "--sort-by", "id desc nulls last")
    run("create_v3", "create", "db.v3", "--schema", "id long, cat string, amount double", "--format-version", "3",
        "--partition-by", "cat")
    run("create_v4_base", "create", "db.v4", "--schema", "id long, cat string, amount double",
        "--partition-by", "cat")
    f1 = _parquet(files / "a.parquet", [1, 2, 3], "x")
    f2 = _parquet(files / "b.parquet", [4, 5], "y")
    f3 = _parquet(files / "c.parquet", [6], "x")
    f4 = _parquet(files / "d.parquet", [7, 8], "x")
    run("add_files_dry_run", "add-files", "db.t", f1, "--dry-run")
    run("add_files", "add-files", "db.t", f1)
    run("add_files_2", "add-files", "db.t", f2)
    run("add_files_branch", "add-files", "db.t", f3, "--branch", "b1", "--create-branch")
    run("add_files_partitioned", "add-files", "db.p", f1)
    call("add-files", "db.p", f3)
    for f in (f1, f2, f3):
        call("add-files", "db.v3", f)
    for f in (f1, f2):
        call("add-files", "db.v4", f)
    for view in ("table", "schema", "snapshots", "history", "refs", "metadata-log", "manifests", "files",
                 "entries", "partitions", "dvs", "tree"):
        for t in ("db.t", "db.p", "db.v3"):
            run(f"inspect_{view}_{t}", "inspect", view, t)
    run("inspect_manifests_all", "inspect", "manifests", "db.t", "--all")
    run("inspect_files_metrics", "inspect", "files", "db.p", "--metrics")
    run("inspect_entries_metrics", "inspect", "entries", "db.v3", "--metrics")
    run("inspect_schema_id", "inspect", "schema", "db.t", "--schema-id", "0")
    run("validate", "validate", "db.p")
    run("validate_all_snapshots_deep", "validate", "db.v3", "--all-snapshots", "--deep")
    run("validate_list_rules", "validate", "--list-rules")
    run("namespace_list", "namespace", "list")
    run("list", "list")
    run("list_namespace", "list", "db")
    run("list_all", "list", "--all")
    run("compact_dry_run", "compact", "db.t", "--dry-run")
    run("compact_dry_run_partitioned", "compact", "db.p", "--dry-run", "--min-manifests", "2")
    run("compact_nothing", "compact", "db.t", "--min-manifests", "50")
    run("compact", "compact", "db.t")
    run("compact_all_dry_run", "compact", "--all", "--dry-run", lines=True)
    run("expire_dry_run", "expire-snapshots", "db.t", "--older-than", "0s", "--retain-last", "1", "--dry-run")
    run("expire_nothing", "expire-snapshots", "db.p")
    run("expire", "expire-snapshots", "db.t", "--older-than", "0s", "--retain-last", "1")
    run("expire_all_dry_run", "expire-snapshots", "--all", "--dry-run", "--older-than", "0s", "--retain-last", "1",
        lines=True)
    run("upgrade_3_dry_run", "upgrade", "db.t", "--to", "3", "--dry-run")
    run("upgrade_2_dry_run", "upgrade", "db.t", "--to", "2", "--dry-run")
    run("upgrade_3", "upgrade", "db.t", "--to", "3")
    run("upgrade_4_dry_run", "upgrade", "db.v4", "--to", "4", "--dry-run")
    run("upgrade_4", "upgrade", "db.v4", "--to", "4", "--yes")
    run("add_files_v4_dry_run", "add-files", "db.v4", f3, "--dry-run")
    run("add_files_v4", "add-files", "db.v4", f3)
    call("add-files", "db.v4", f4)
    for view in ("table", "snapshots", "manifests", "files", "entries", "partitions", "tree"):
        run(f"inspect_{view}_db.v4", "inspect", view, "db.v4")
    run("remove_files_dry_run", "remove-files", "db.v4", f3, "--dry-run")
    run("remove_files", "remove-files", "db.v4", f3)
    run("remove_files_where", "remove-files", "db.v4", "--where", "cat=y")
    run("remove_files_nothing", "remove-files", "db.v4", "--where", "cat=zzz")
    run("compact_v4_dry_run", "compact", "db.v4", "--dry-run")
    run("compact_v4", "compact", "db.v4")
    run("validate_v4", "validate", "db.v4")
    run("expire_v4_dry_run", "expire-snapshots", "db.v4", "--older-than", "0s", "--retain-last", "1", "--dry-run")
    run("compact_v3", "compact", "db.v3")
    run("expire_refused", "expire-snapshots", "db.v3", "--older-than", "0s", "--retain-last", "1",
        "--max-deletes", "0")
    run("expire_leftovers", "expire-snapshots", "db.v3", "--older-than", "0s", "--retain-last", "1")
    call("create", "db.bad", "--schema", "id long")
    for meta in (wh / "db" / "bad" / "metadata").glob("*.metadata.json"):
        meta.write_text("{")
    run("expire_all_with_failure", "expire-snapshots", "--all", "--dry-run", lines=True)
    run("compact_all_with_failure", "compact", "--all", lines=True)
    return out


_NORMALIZE = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?"), "<time>"),
    (re.compile(r"-?\d{12,}"), "<id>"),
    (re.compile(r"\d+ bytes"), "<n> bytes"),
]
# Values that change from run to run (times, sizes of files holding random ids, timings).
_VOLATILE_KEYS = {"manifest_length", "bytes", "bytes_in", "bytes_out", "estimated_bytes_out", "added_files_size",
                  "file_size_in_bytes", "total-files-size", "added-files-size", "removed-files-size", "seconds",
                  "timestamp_ms", "committed_at", "made_current_at", "timestamp", "last_updated_ms",
                  "total_files_size", "file_size", "size", "column_sizes", "length", "offset"}


def normalize(value: Any, tmp: str, key: str = "") -> Any:
    if key in _VOLATILE_KEYS and isinstance(value, int | float | dict | str) and not isinstance(value, bool):
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        return {normalize(k, tmp): normalize(v, tmp, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v, tmp, key) for v in value]
    if isinstance(value, str):
        if key == "text":  # the terminal view: wrapped where long paths fall, column widths follow sizes
            value = re.sub(r"[\s─━]+", "", value)
        s = value.replace(tmp, "<tmp>")
        for pattern, repl in _NORMALIZE:
            s = pattern.sub(repl, s)
        if key == "text":
            s = re.sub(r"\d+", "N", s)
        return s
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**11:
        return "<id>"
    return value


def capture() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        tmp = str(Path(d).resolve())
        return normalize(scenarios(Path(tmp)), tmp)


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(capture(), indent=1, ensure_ascii=False) + "\n")
