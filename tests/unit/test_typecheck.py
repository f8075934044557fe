"""The standard's "type hints throughout, checked by mypy": mypy over icectl/ finds nothing.

It runs ``python -m mypy`` as a developer would, from the repository root with pyproject.toml's
``[tool.mypy]`` (the files, the strictness, the per-module ignores of untyped libraries). Its cache
goes to .mypy_cache/ at the root (git ignores it): a run after the first checks only what changed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_errors_in_icectl() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the test extra: pip install -e '.[test]')")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"mypy reports errors (python -m mypy, from {ROOT}):\n{proc.stdout}{proc.stderr}"
    assert "Success" in proc.stdout, proc.stdout + proc.stderr
