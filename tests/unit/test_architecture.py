"""The house rules of icectl/, checked rather than hoped for (docs/architecture.md).

* the layer contracts in pyproject.toml's ``[tool.importlinter]`` hold (a layer imports only
  layers below it; codecs and spec stay pure), and a deliberate upward import breaks them;
* no function-local imports of icectl modules (they hide cycles); ``if TYPE_CHECKING:`` is fine.
  The exceptions are the modules in RUN_TIME_IMPORTERS, which import a module only when it is used
  so that ``icectl --help`` and ``inspect table`` start fast (issue 15); they alone may also call
  ``importlib.import_module``;
* no module imports another module's ``_private`` names (make them public or move them);
* no module is longer than 600 lines, no function longer than 80 (issue 28);
* no block of 10 or more lines is repeated inside icectl/ (blank lines, comments and imports aside).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "icectl"
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
REPEATED_BLOCK = 10
# Over the limit until the snapshot writer (compact/v4.py) and commits-as-updates (expire.py)
# branches land; each entry must still be over the limit, so a stale one fails below.
PENDING_SIZE_EXCEPTIONS: set[str] = set()
# The only modules that import icectl modules at run time, and why (docs/architecture.md, "Start-up").
RUN_TIME_IMPORTERS = {
    "icectl/cli/registry.py": "the command registry imports a command's module when the command is used",
    "icectl/cli/launch.py": "the console entry imports the app only when the view cache cannot replay the run",
    "icectl/catalog/__init__.py": "open_catalog imports the SQL, REST and Glue clients for a catalog of that type",
    "icectl/catalog/operations.py": "LocalCommits.commit_change imports the commit machinery (spec.updates)",
    "icectl/cli/output/terminal_views.py": "a result's own terminal renderer is imported when such a result is printed",
    "icectl/engine/__init__.py": "open_engine imports the Spark engine (pyspark, a JVM) only for --engine spark, "
                                 "Engine.doomed_files the reachability walk only when an expiry asks",
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _is_icectl(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "icectl"
    return any(alias.name.split(".")[0] == "icectl" for alias in node.names)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_in_functions(tree: ast.AST, in_function: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function and _is_icectl(child):
            yield child
        nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _imports_in_functions(child, nested)


def _lint_imports(pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}  # analyse this tree, not an installed icectl
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run([exe, "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")], cwd=pythonpath,
                          env=env, capture_output=True, text=True, timeout=120)


def test_layer_contracts_hold() -> None:
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def test_an_upward_import_breaks_the_contracts(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "icectl", ignore=shutil.ignore_patterns("__pycache__"))
    spec_module = tmp_path / "icectl" / "spec" / "properties.py"
    spec_module.write_text(spec_module.read_text() + "\nimport icectl.table  # noqa: E402\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    assert "icectl.spec.properties -> icectl.table" in run.stdout


def _dynamic_imports(tree: ast.AST) -> Iterator[ast.Call]:
    """``importlib.import_module(...)``, ``import_module(...)`` and ``__import__(...)`` calls."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in {"import_module", "__import__"}:
                yield node


def test_no_function_local_imports_of_icectl() -> None:
    found = [f"{path}:{node.lineno}" for path, tree in _modules() if path not in RUN_TIME_IMPORTERS
             for node in _imports_in_functions(tree)]
    assert not found, f"import at module level (or under `if TYPE_CHECKING:`): {found}"


def test_only_the_run_time_importers_import_dynamically() -> None:
    found = [f"{path}:{node.lineno}" for path, tree in _modules() if path not in RUN_TIME_IMPORTERS
             for node in _dynamic_imports(tree)]
    assert not found, f"import at module level; run-time imports belong in {sorted(RUN_TIME_IMPORTERS)}: {found}"
    trees = dict(_modules())
    stale = [p for p in RUN_TIME_IMPORTERS
             if p not in trees or not (list(_imports_in_functions(trees[p])) or list(_dynamic_imports(trees[p])))]
    assert not stale, f"remove from RUN_TIME_IMPORTERS (they import nothing at run time): {stale}"


def test_no_imports_of_private_names() -> None:
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _is_icectl(node):
                found += [f"{path}:{node.lineno} {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, f"make these public or move them: {found}"


def test_modules_are_short() -> None:
    lines = {path: len((ROOT / path).read_text().splitlines()) for path, _ in _modules()}
    too_long = {p: n for p, n in lines.items() if n > MAX_LINES and p not in PENDING_SIZE_EXCEPTIONS}
    assert not too_long, f"split these modules (limit {MAX_LINES} lines): {too_long}"
    stale = sorted(p for p in PENDING_SIZE_EXCEPTIONS if lines.get(p, 0) <= MAX_LINES)
    assert not stale, f"remove from PENDING_SIZE_EXCEPTIONS: {stale}"


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{path}:{node.lineno} {node.name} ({n} lines)")
    assert not too_long, f"split these functions (limit {MAX_FUNCTION_LINES} lines): {too_long}"


def test_no_repeated_blocks() -> None:
    windows: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path, _ in _modules():
        code = [(n, line.strip()) for n, line in enumerate((ROOT / path).read_text().splitlines(), 1)]
        code = [(n, t) for n, t in code if t and not t.startswith(("#", "from ", "import ")) and t not in "()[]"]
        for i in range(len(code) - REPEATED_BLOCK + 1):
            windows[tuple(t for _, t in code[i:i + REPEATED_BLOCK])].append(f"{path}:{code[i][0]}")
    repeated = sorted({tuple(where) for where in windows.values() if len(where) > 1})
    assert not repeated, f"{REPEATED_BLOCK}+ lines repeated (make it one function): {repeated[:5]}"


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    from icectl.errors import UsageError\n", 1),
    ("def f():\n    from . import x\n", 1),
    ("def f():\n    import json\n", 0),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from icectl.spec import metadata\n", 0),
    ("class A:\n    def m(self):\n        import icectl.table\n", 1),
])
def test_the_local_import_check_sees_them(source: str, expected: int) -> None:
    assert len(list(_imports_in_functions(ast.parse(source)))) == expected


@pytest.mark.parametrize("source, expected", [
    ("import importlib\ndef f():\n    return importlib.import_module('icectl.cli.x')\n", 1),
    ("from importlib import import_module\nm = import_module('icectl')\n", 1),
    ("m = __import__('icectl')\n", 1),
    ("import json\njson.loads('1')\n", 0),
])
def test_the_dynamic_import_check_sees_them(source: str, expected: int) -> None:
    assert len(list(_dynamic_imports(ast.parse(source)))) == expected
