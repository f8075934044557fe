"""Compaction planning options (icectl.ops.compact.plan). Planning itself is exercised through
``compact`` in test_manifests.py (v1-v3) and test_v4.py."""

from __future__ import annotations

import pytest

from icectl.errors import UsageError
from icectl.ops.compact.plan import parse_size


def test_parse_size() -> None:
    assert parse_size("8388608") == 8 * 1024 * 1024
    assert parse_size("8MiB") == 8 * 1024 * 1024
    assert parse_size("512 KiB") == 512 * 1024
    assert parse_size("1.5MB") == 1_500_000
    for bad in ("", "8 parsecs", "-1", "100"):
        with pytest.raises(UsageError):
            parse_size(bad)
