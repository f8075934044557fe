#!/usr/bin/env python3
"""Regenerate completions/ and man/ from the icectl app, and docs/validate-rules.md from the rule catalogue.

tests/unit/cli/test_docgen.py and tests/unit/validate/test_validate.py fail when they are stale."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from icectl.cli.app import app  # noqa: E402
from icectl.cli.docs.docgen import generated_files  # noqa: E402
from icectl.validate import catalogue_markdown  # noqa: E402


def main() -> int:
    files = generated_files(app)
    for d in ("completions", "man"):
        for old in (ROOT / d).glob("*"):
            if f"{d}/{old.name}" not in files:
                old.unlink()
    for rel, text in files.items():
        p = ROOT / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (ROOT / "docs" / "validate-rules.md").write_text(catalogue_markdown())
    print(f"wrote {len(files) + 1} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
