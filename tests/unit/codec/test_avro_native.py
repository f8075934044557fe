"""The native Avro decoder (DataFusion) gives exactly the fastavro path's Arrow tables, or declines.

Every manifest of the Spark fixtures must decode natively (no silent fallback) to a table equal,
column for column and with its metadata, to the one fastavro's records build; damaged files must
never decode natively to anything fastavro would not give.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from icectl.codec import avro_native
from icectl.codec.avro import writer_schema
from icectl.codec.avro_native import DECODER_ENV, NotNative, drop_empty_records, native_enabled
from icectl.codec.manifest_arrow import (
    DECODE_KEY,
    NotArrowRepresentable,
    manifest_table,
    native_manifest_table,
)
from icectl.codec.manifest_list_arrow import LIST_METADATA, list_decode_key, manifest_list_table
from icectl.codec.manifest_list_native import native_list_table
from icectl.codec.manifest_reader import open_manifest, open_manifest_list, read_manifest, read_manifest_list
from icectl.errors import IcectlError
from icectl.spec.manifest import ManifestFile
from icectl.spec.schema import StructType

from .test_manifest_arrow import every_type_manifest, table_files
from .test_manifest_writer import PTYPE, SPEC

pytest.importorskip("datafusion")


def fastavro_table(data: bytes, m: ManifestFile, ptype: StructType, version: int,
                   monkeypatch: pytest.MonkeyPatch) -> pa.Table:
    with monkeypatch.context() as mp:
        mp.setenv(DECODER_ENV, "fastavro")
        assert not native_enabled()
        return manifest_table(data, manifest=m, partition_type=ptype, format_version=version)


def skip_if_stuck() -> None:
    """A real read that hung earlier in this process (a damaged-file test) turns DataFusion off here."""
    if avro_native._stuck.is_set():
        pytest.skip("an earlier damaged-file read hung DataFusion in this process: native decoding is off")


def keep_stuck(original: threading.Event, monkeypatch: pytest.MonkeyPatch) -> bool:
    """After a damaged-file read: carry a hang over to the process (True: stop reading natively)."""
    if avro_native._stuck.is_set():
        original.set()
        return True
    monkeypatch.setattr(avro_native, "_stuck", threading.Event())
    return False


def native_table(data: bytes, m: ManifestFile, ptype: StructType, version: int) -> pa.Table:
    layout = open_manifest(data, partition_type=ptype, format_version=version)
    return native_manifest_table(data, layout, m, ptype, version)


def assert_same(native: pa.Table, reference: pa.Table) -> None:
    assert native.schema.equals(reference.schema, check_metadata=True)
    for name in reference.column_names:  # one column at a time: a failure names it
        got, want = native.column(name).combine_chunks(), reference.column(name).combine_chunks()
        if pa.types.is_list(want.type):  # NaN != NaN: compare the bytes' lists as Python values
            assert got.to_pylist() == want.to_pylist(), name
        else:
            assert got.equals(want), name


@pytest.mark.parametrize("kind", ["v1_unpart", "v2_part", "v3_dv", "many_snaps"])
def test_every_fixture_manifest_decodes_natively_to_the_same_table(spark_tables, kind: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    skip_if_stuck()
    seen: set[str] = set()
    for md, _path, _list, manifests in table_files(Path(spark_tables[kind].location)):
        for m, data in manifests:
            if m.manifest_path in seen:
                continue
            seen.add(m.manifest_path)
            ptype = md.partition_type(m.partition_spec_id)
            assert_same(native_table(data, m, ptype, md.format_version),
                        fastavro_table(data, m, ptype, md.format_version, monkeypatch))
    assert seen


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_partition_type_and_inheritance_decode_natively(version: int, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    skip_if_stuck()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the reader's file goes
    result = every_type_manifest(version, 40)
    for seq in (0, 4):
        m = result.to_manifest_file("m.avro", len(result.data), SPEC.spec_id, 99, 0 if version == 1 else seq,
                                    first_row_id=1000 if version >= 3 else None)
        native = native_table(result.data, m, PTYPE, version)
        assert_same(native, fastavro_table(result.data, m, PTYPE, version, monkeypatch))
        assert native.column("partition").to_pylist()[2][2] is None  # a null partition value
    assert len(set(map(tuple, native.column("partition").to_pylist()))) > 16  # many distinct partitions
    assert list(tmp_path.iterdir()) == []  # the reader's temporary files are gone


def test_an_empty_record_is_dropped_from_the_schema_only() -> None:
    schema = {"type": "record", "name": "e", "fields": [
        {"name": "a", "type": "int"},
        {"name": "p", "type": {"type": "record", "name": "r102", "fields": []}},
        {"name": "d", "type": {"type": "record", "name": "df", "fields": [
            {"name": "q", "type": {"type": "record", "name": "r2", "fields": []}}, {"name": "x", "type": "long"}]}}]}
    got = drop_empty_records(schema)
    assert json.dumps(got) == json.dumps({"type": "record", "name": "e", "fields": [
        {"name": "a", "type": "int"},
        {"name": "d", "type": {"type": "record", "name": "df", "fields": [{"name": "x", "type": "long"}]}}]})
    assert drop_empty_records(got) is got
    with pytest.raises(NotNative):
        drop_empty_records({"type": "record", "name": "e", "fields": [
            {"name": "u", "type": ["null", {"type": "record", "name": "r", "fields": []}]}]})


def test_damaged_manifests_never_decode_natively_to_something_else(spark_tables,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(31)
    checked = declined = 0
    # A read that never ends turns the native path off for the process: keep that to this test.
    monkeypatch.setattr(avro_native, "_DEADLINE_SECONDS", 3.0)
    skip_if_stuck()
    original = avro_native._stuck
    monkeypatch.setattr(avro_native, "_stuck", threading.Event())
    for kind in ("v2_part", "v1_unpart"):
        md, _p, _l, manifests = next(t for t in table_files(Path(spark_tables[kind].location)) if t[3])
        m, data = manifests[0]
        ptype = md.partition_type(m.partition_spec_id)
        cuts = [data[:3], data[:40], data[: len(data) // 2], data[:-1], data[:-17], data + b"\x00"]
        flips = []
        for _ in range(60):
            b = bytearray(data)
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            flips.append(bytes(b))
        for bad in cuts + flips:
            checked += 1
            try:
                reference: pa.Table | None = fastavro_table(bad, m, ptype, md.format_version, monkeypatch)
            except (IcectlError, NotArrowRepresentable):
                reference = None
            try:
                native = native_table(bad, m, ptype, md.format_version)
            except Exception:  # declined (or stuck): the caller decodes with fastavro, which decides
                declined += 1
                if keep_stuck(original, monkeypatch):
                    return
                continue
            if reference is None:
                # The one leniency left: a union branch index out of range (a flipped tag byte)
                # reads as the value branch, so the record decodes as it was written, where
                # fastavro refuses the file. Anything else fastavro refuses must not decode.
                with pytest.raises(IcectlError, match="IndexError: list index out of range"):
                    list(read_manifest(bad, manifest=m, partition_type=ptype, format_version=md.format_version))
                assert_same(native, native_table(data, m, ptype, md.format_version))
                continue
            assert_same(native, reference)
            # and the public entry point gives the reader's entries either way
            got = manifest_table(bad, manifest=m, partition_type=ptype, format_version=md.format_version)
            assert got.num_rows == len(list(read_manifest(bad, manifest=m, partition_type=ptype,
                                                          format_version=md.format_version)))
    assert checked == 132 and declined >= 12  # every cut at least is declined


def test_the_environment_switch_and_a_missing_library_turn_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_if_stuck()  # a damaged-file read that hung DataFusion earlier in this process turned it off
    assert native_enabled()
    monkeypatch.setenv(DECODER_ENV, "FastAvro")
    assert not native_enabled()
    monkeypatch.setenv(DECODER_ENV, "native")
    monkeypatch.setattr(avro_native, "_datafusion_available", lambda: False)
    assert not native_enabled()


def test_datafusion_is_imported_by_the_first_native_read_only() -> None:
    # ~0.2 s of start-up (it pulls in pandas where installed) that a run served from the manifest
    # cache never needs.
    code = ("import sys\nfrom icectl.codec import avro_native\nassert avro_native.native_enabled()\n"
            "print('datafusion' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, DECODER_ENV: "native"}).stdout
    assert out.strip() == "False"


def test_a_library_found_but_not_importable_goes_to_fastavro(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    skip_if_stuck()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def broken() -> None:
        raise ImportError("libdatafusion.so: cannot open shared object file")

    monkeypatch.setattr(avro_native, "_borrow_session", broken)
    result = every_type_manifest(2, 10)
    m = result.to_manifest_file("m.avro", len(result.data), SPEC.spec_id, 99, 4)
    with pytest.raises(NotNative, match="cannot be imported"):
        native_table(result.data, m, PTYPE, 2)
    assert native_enabled()  # an error, not a hang: the native path stays on
    read = manifest_table(result.data, manifest=m, partition_type=PTYPE, format_version=2)
    assert read.equals(fastavro_table(result.data, m, PTYPE, 2, monkeypatch))


def test_a_native_read_that_never_ends_goes_to_fastavro(spark_tables, monkeypatch: pytest.MonkeyPatch) -> None:
    # DataFusion 55 was seen spinning forever on a manifest with one flipped bit that fastavro
    # decodes; the read's deadline hands the file to fastavro and turns the native path off.
    md, _p, _l, manifests = next(t for t in table_files(Path(spark_tables["v2_part"].location)) if t[3])
    m, data = manifests[0]
    ptype = md.partition_type(m.partition_spec_id)
    never = threading.Event()
    reader_thread: list[int] = []

    class Stuck:  # a session whose read never returns (its thread waits for good, using no CPU)
        def read_avro(self, path: str) -> Stuck:
            return self

        def to_arrow_table(self) -> pa.Table:
            reader_thread.append(threading.get_native_id())
            never.wait()
            raise AssertionError("unreachable")

    monkeypatch.setattr(avro_native, "_borrow_session", Stuck)
    monkeypatch.setattr(avro_native, "_DEADLINE_SECONDS", 0.2)
    monkeypatch.setattr(avro_native, "_stuck", threading.Event())
    started = time.monotonic()
    got = manifest_table(data, manifest=m, partition_type=ptype, format_version=md.format_version)
    assert time.monotonic() - started < 10
    assert not native_enabled()
    if hasattr(os, "setpriority"):  # the stuck thread only gets idle CPU from now on
        assert os.getpriority(os.PRIO_PROCESS, reader_thread[0]) == 19
    monkeypatch.setenv(DECODER_ENV, "fastavro")
    assert_same(got, manifest_table(data, manifest=m, partition_type=ptype, format_version=md.format_version))


@pytest.mark.parametrize("kind", ["v1_unpart", "v2_part", "v3_dv", "many_snaps"])
def test_every_fixture_manifest_list_decodes_natively_to_the_same_table(spark_tables, kind: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    skip_if_stuck()
    lists = 0
    for md, _path, data, _manifests in table_files(Path(spark_tables[kind].location)):
        reader, names, summary_names = open_manifest_list(data, format_version=md.format_version)
        meta = {LIST_METADATA: json.dumps(dict(reader.metadata)).encode(), DECODE_KEY: list_decode_key()}
        with monkeypatch.context() as mp:
            mp.setenv(DECODER_ENV, "fastavro")
            reference = manifest_list_table(data, format_version=md.format_version)
        columns = {f.name: f.type for f in reference.schema}
        native = native_list_table(data, writer_schema(reader), names, summary_names, columns, meta)
        assert_same(native, reference)
        assert manifest_list_table(data, format_version=md.format_version).equals(reference, check_metadata=True)
        lists += 1
    assert lists


def test_damaged_manifest_lists_never_decode_natively_to_something_else(spark_tables,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(32)
    monkeypatch.setattr(avro_native, "_DEADLINE_SECONDS", 3.0)
    md, _p, data, _m = next(iter(table_files(Path(spark_tables["v2_part"].location))))
    skip_if_stuck()
    original = avro_native._stuck
    monkeypatch.setattr(avro_native, "_stuck", threading.Event())
    for bad in [data[:20], data[:-1], data[: len(data) // 2], *(bytes(b) for b in _flip_list(data, rng, 60))]:
        with monkeypatch.context() as mp:
            mp.setenv(DECODER_ENV, "fastavro")
            try:
                reference: pa.Table | None = manifest_list_table(bad, format_version=md.format_version)
            except (IcectlError, NotArrowRepresentable):
                reference = None
        try:
            reader, names, summary_names = open_manifest_list(bad, format_version=md.format_version)
            meta = {LIST_METADATA: json.dumps(dict(reader.metadata)).encode(), DECODE_KEY: list_decode_key()}
            columns = {f.name: f.type for f in manifest_list_table(data, format_version=md.format_version).schema}
            native = native_list_table(bad, writer_schema(reader), names, summary_names, columns, meta)
        except Exception:  # declined: fastavro decides
            if keep_stuck(original, monkeypatch):
                return
            continue
        if reference is None:  # the documented leniency only (see the manifest test)
            with pytest.raises(IcectlError, match="IndexError: list index out of range"):
                read_manifest_list(bad, format_version=md.format_version)
            continue
        assert_same(native, reference)


def _flip_list(data: bytes, rng: random.Random, n: int) -> list[bytearray]:
    out = []
    for _ in range(n):
        b = bytearray(data)
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        out.append(b)
    return out


_DAMAGED_READ = """
import json, os, sys, time
from icectl.codec import avro_native
from icectl.codec.manifest_arrow import manifest_table
from icectl.errors import IcectlError
from icectl.spec.manifest import ManifestFile
from icectl.spec.schema import StructType
bad = open(sys.argv[1], "rb").read()
m = ManifestFile(manifest_path="m.avro", manifest_length=len(bad), partition_spec_id=0, added_snapshot_id=1,
                 sequence_number=0)
avro_native._DEADLINE_SECONDS = 1.0
started = time.monotonic()
try:
    manifest_table(bad, manifest=m, partition_type=StructType(()), format_version=1)
    error = None
except IcectlError as e:
    error = e.message
print(json.dumps({"error": error, "seconds": time.monotonic() - started, "hung": avro_native._stuck.is_set(),
                  "native_after": avro_native.native_enabled()}), flush=True)
os._exit(0)  # a reader thread may still spin in DataFusion
"""


def test_a_real_damaged_manifest_that_hangs_datafusion_gets_the_readers_error() -> None:
    """A Spark-written v1 manifest (one deflate block) with bit 3 of byte 6101 flipped (found by a
    bit-flip search): zlib inflates the block, whose strings are then no longer UTF-8. fastavro
    refuses it; DataFusion 55 spins on it for good. icectl hands it to fastavro after the deadline
    and reports the reader's error. In a process of its own: the spinning thread ends with it."""
    path = Path(__file__).parent / "data" / "v1-manifest-one-bit-flipped.avro"
    done = subprocess.run([sys.executable, "-c", _DAMAGED_READ, str(path)], capture_output=True, text=True,
                          timeout=120, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["error"] and "not valid UTF-8" in got["error"]
    assert got["seconds"] < 30
    assert got["native_after"] is not got["hung"]  # a hang turns the native path off, for that process only


def _zigzag_len(v: int) -> int:
    u = ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    n = 1
    while u >= 128:
        u >>= 7
        n += 1
    return n


def test_long_lengths_are_exact_at_every_varint_boundary() -> None:
    # The length check counts each long's bytes through a float exponent: values just below a power
    # of 2**7 that round up as floats (2**56 - 1, 2**63 - 1) must still get their exact length.
    values = {0, 1, -1, 2**63 - 1, -(2**63)}
    for k in range(1, 64):
        for d in (-2, -1, 0, 1):
            values.update({(1 << k) + d, -((1 << k) + d)})
    for k in range(53, 64):
        values.update({(1 << k) - (1 << (k - 53)), (1 << k) - (1 << (k - 52)), -((1 << k) - (1 << (k - 53)))})
    values = sorted(v for v in values if -(2**63) <= v < 2**63)
    got = avro_native._long_len(pa.array([*values, None], pa.int64())).to_pylist()
    assert got == [_zigzag_len(v) for v in values] + [1]
