#!/usr/bin/env python3
"""Follow a command's table argument at run time: which icectl files it enters, and how often the trail
climbs back up a floor (issue 28's acceptance figure: "expire-snapshots' table argument from the
command to the deletes enters at most 12 files with at most 15 calls back up a layer").

The trail is every call of an icectl function that receives the table being worked on (the ``Table``,
its ``FileIO`` or its ``TableMetadata``) as an argument, in call order, until the last delete. A file's
floor comes from the import graph (1 + the highest floor among the icectl modules it imports), so a
step onto a higher floor than the previous step's file is a climb (the trail went back up the layers,
mostly by returning), and a call from a file on a lower floor into one on a higher floor (a callback)
is a call back up.

    python scripts/walk.py expire-snapshots TABLE_DIR [icectl options...]   # prints the figures as JSON

Run it on a copy: the command really runs (use --dry-run to walk without deleting; the figures then
stop at the plan).
"""

from __future__ import annotations

import ast
import itertools
import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

PKG = Path(__file__).resolve().parent.parent / "icectl"


def module_of(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floors() -> dict[str, int]:
    """Each icectl module's floor in the import graph (top-level and TYPE_CHECKING imports alike)."""
    imports: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        mod = module_of(path)
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("icectl"):
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("icectl"))
        imports[mod] = deps
    known = set(imports)
    graph = {m: {d for d in deps if d in known and d != m and not m.startswith(d + ".")} for m, deps in imports.items()}
    memo: dict[str, int] = {}

    def floor(m: str, stack: frozenset[str] = frozenset()) -> int:
        if m in memo:
            return memo[m]
        below = [floor(d, stack | {m}) for d in graph[m] if d not in stack]
        memo[m] = 1 + max(below, default=0)
        return memo[m]

    return {m: floor(m) for m in graph}


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(PKG.parent))
    from icectl.cli.app import app  # the real command line, in this process
    from icectl.spec.metadata import TableMetadata
    from icectl.storage import FileIO
    from icectl.table import Table

    floor_of = floors()
    tracked: set[int] = set()
    trail: list[str] = []
    calls_up: list[str] = []  # a call from a lower floor into a higher one (a callback)

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(str(PKG)):
            return
        code = frame.f_code
        for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
            value = frame.f_locals.get(name)
            if isinstance(value, Table):
                tracked.update({id(value), id(value.io), id(value.metadata)})
            if isinstance(value, (Table, FileIO, TableMetadata)) and id(value) in tracked:
                trail.append(module_of(Path(filename)))
                back = frame.f_back
                if back is not None and back.f_code.co_filename.startswith(str(PKG)):
                    caller = module_of(Path(back.f_code.co_filename))
                    if floor_of.get(trail[-1], 0) > floor_of.get(caller, 0):
                        calls_up.append(f"{caller} -> {trail[-1]}.{code.co_name}")
                return

    sys.setprofile(watch)
    try:
        app(argv, prog_name="icectl")
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    finally:
        sys.setprofile(None)
    steps = [m for i, m in enumerate(trail) if i == 0 or trail[i - 1] != m]  # one step per move between files
    climbs = sum(1 for a, b in itertools.pairwise(steps) if floor_of.get(b, 0) > floor_of.get(a, 0))
    seen: list[str] = []
    for m in steps:
        if m not in seen:
            seen.append(m)
    print(json.dumps({"command": argv, "exit_code": code, "steps": len(steps), "files": len(seen),
                      "climbs": climbs, "returns": len(steps) - len(seen),
                      "calls_up": len(calls_up), "files_entered": seen, "calls_up_list": calls_up}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
