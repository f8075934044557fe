"""Manifests decoded in worker processes give what decoding in this process gives, errors included."""

from __future__ import annotations

from pathlib import Path

import pytest

import icectl.table.manifest_read as manifest_read
from icectl import processes
from icectl.errors import CorruptInputError
from icectl.table import load_table
from icectl.table.scan import iter_entries
from unit.table.test_cache_read_paths import current_manifests, make_table


@pytest.fixture
def pool_for_everything(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(manifest_read, "POOL_MIN_BATCH_BYTES", 0)
    monkeypatch.setattr(manifest_read, "POOL_MIN_FILE_BYTES", 0)
    monkeypatch.setenv("ICECTL_DECODE_PROCESSES", "2")
    # Worker processes serve the fastavro path only: the native decoder releases the GIL, so the
    # reading threads decode in parallel without them.
    monkeypatch.setenv("ICECTL_AVRO_DECODER", "fastavro")
    monkeypatch.setenv("ICECTL_CACHE", "off")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")  # small manifests go the Arrow way too


def entries(d: Path) -> list[tuple[str, object]]:
    table = load_table(str(d))
    return [(m.manifest_path, e) for m, e in iter_entries(table.metadata, table.io, current_manifests(d))]


def test_workers_decode_what_this_process_decodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  pool_for_everything: None) -> None:
    d, _ = make_table(tmp_path)
    with monkeypatch.context() as m:
        m.setenv("ICECTL_DECODE_PROCESSES", "0")
        inline = entries(d)
    assert manifest_read.batch_options(current_manifests(d)).use_pool
    assert entries(d) == inline and len(inline) == 3
    assert processes._pool is not None


def test_a_corrupt_manifest_fails_the_same_in_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      pool_for_everything: None) -> None:
    d, _ = make_table(tmp_path)
    victim = current_manifests(d)[1].manifest_path
    data = Path(victim).read_bytes()
    Path(victim).write_bytes(data[: len(data) // 2])
    with monkeypatch.context() as m:
        m.setenv("ICECTL_DECODE_PROCESSES", "0")
        with pytest.raises(CorruptInputError) as inline:
            entries(d)
    with pytest.raises(CorruptInputError) as pooled:
        entries(d)
    assert pooled.value.message == inline.value.message and victim in pooled.value.message
