"""Paths and the local FileIO: one spelling per file, and every failure an icectl error with its exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from icectl.errors import ExitCode, NotFoundError, StorageError
from icectl.storage import (
    FileIO,
    S3Settings,
    checksum_sidecar,
    file_key,
    is_within,
    join,
    local_path,
    parent,
    scheme_of,
)


@pytest.mark.parametrize(("path", "scheme", "key"), [
    ("/w/t/f.parquet", "file", "/w/t/f.parquet"),
    ("file:/w/t/f.parquet", "file", "/w/t/f.parquet"),
    ("file:///w/t/f.parquet", "file", "/w/t/f.parquet"),
    ("/w/x/../t/./f.parquet", "file", "/w/t/f.parquet"),
    ("s3a://bucket/t/f.parquet", "s3a", "s3://bucket/t/f.parquet"),
    ("s3n://bucket/t/f.parquet", "s3n", "s3://bucket/t/f.parquet"),
    ("S3://bucket/t/f.parquet", "s3", "s3://bucket/t/f.parquet"),
    ("C:/w/f.parquet", "file", "C:/w/f.parquet"),  # a drive letter is no scheme
], ids=["bare", "file-one-slash", "file-three-slashes", "dots", "s3a", "s3n", "upper-case", "drive-letter"])
def test_one_key_per_physical_file(path: str, scheme: str, key: str) -> None:
    assert scheme_of(path) == scheme
    assert file_key(path) == key


def test_join_parent_and_within() -> None:
    assert local_path("file:///w/t") == local_path("file:/w/t") == local_path("/w/t") == "/w/t"
    assert join("s3://b/t/", "/metadata/", "v1.metadata.json") == "s3://b/t/metadata/v1.metadata.json"
    assert join("/t", "data", "a/b.parquet") == "/t/data/a/b.parquet"
    assert parent("s3a://b/t/metadata/") == "s3a://b/t"
    assert parent("file:///w/t/v1.json") == "file:///w/t"
    assert parent("/w/t/v1.json") == "/w/t"
    assert is_within("s3a://b/t/data/f.parquet", "s3://b/t")
    assert is_within("file:/w/t/data/f", "/w/t/")
    assert not is_within("/w/t2/data/f", "/w/t")  # a sibling sharing the prefix is not inside
    assert not is_within("/w/t", "/w/t")  # the folder itself is not inside itself
    assert not is_within("s3://other/t/f", "s3://b/t")


def test_checksum_sidecar_only_on_local_disks() -> None:
    assert checksum_sidecar("file:/w/t/metadata/version-hint.text") == "file:/w/t/metadata/.version-hint.text.crc"
    assert checksum_sidecar("/w/t/v1.metadata.json") == "/w/t/.v1.metadata.json.crc"
    assert checksum_sidecar("s3://b/t/metadata/version-hint.text") is None


def test_local_round_trip_under_every_spelling(tmp_path: Path) -> None:
    io = FileIO()
    target = tmp_path / "a" / "b" / "f.bin"  # parents are created
    io.write(f"file://{target}", b"0123456789")
    assert target.read_bytes() == b"0123456789"
    for spelling in (str(target), f"file:{target}", f"file://{target}"):
        assert io.read(spelling) == b"0123456789"
        assert io.exists(spelling) and io.size(spelling) == 10
    assert io.read_range(str(target), 3, 4) == b"3456"
    assert io.is_dir(str(tmp_path / "a")) and not io.is_dir(str(target))
    (tmp_path / "a" / "b" / "g.bin").write_bytes(b"")
    assert sorted(io.list_names(f"file:{tmp_path / 'a' / 'b'}")) == ["f.bin", "g.bin"]
    assert io.list_names(str(tmp_path / "missing")) == []
    assert io.delete(str(target)) is True and not target.exists()
    assert io.delete(str(target)) is False  # already gone: not an error
    assert not io.exists(str(target))


def test_failures_are_icectl_errors_with_exit_codes(tmp_path: Path) -> None:
    io = FileIO()
    missing = str(tmp_path / "nope.avro")
    with pytest.raises(NotFoundError, match="file not found") as e:
        io.read(missing)
    assert e.value.exit_code == ExitCode.NOT_FOUND == 3 and e.value.path == missing
    with pytest.raises(NotFoundError, match="directory"):
        io.read(str(tmp_path))
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    with pytest.raises(StorageError) as e:  # a file where a folder should be: not a missing file
        io.write(str(blocker / "child"), b"y")
    assert e.value.exit_code == ExitCode.STORAGE == 8 and str(blocker / "child") in e.value.message
    with pytest.raises(StorageError, match="no storage support for nosuchscheme://") as e:
        io.read("nosuchscheme://x/y")
    assert e.value.exit_code == ExitCode.STORAGE
    with pytest.raises(StorageError, match="needs local files"):
        io.rename_no_replace("s3://b/tmp", "s3://b/final")


def test_create_and_replace_never_show_a_partial_or_replace_an_existing_file(tmp_path: Path) -> None:
    io = FileIO()
    final = str(tmp_path / "v2.metadata.json")
    assert io.write_if_absent(final, b"first") is True
    assert io.write_if_absent(final, b"second") is False
    assert Path(final).read_bytes() == b"first"
    src = tmp_path / "tmp-src"
    src.write_bytes(b"other")
    assert io.rename_no_replace(str(src), final) is False and src.exists()  # left in place on False
    assert io.supports_conditional_create(str(tmp_path))
    hint = str(tmp_path / "version-hint.text")
    io.write_atomic(hint, b"1")
    io.write_atomic(hint, b"2", temp_name="x-version-hint.temp")
    assert Path(hint).read_bytes() == b"2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp-src", "v2.metadata.json", "version-hint.text"]


def test_s3_settings_fall_back_to_the_aws_endpoint_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    opts = S3Settings(region="eu-west-1", access_key_id="AK", secret_access_key="SK").fsspec_options()
    assert opts["client_kwargs"] == {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}
    assert (opts["key"], opts["secret"], "token" in opts) == ("AK", "SK", False)
    assert opts["use_listings_cache"] is False  # another writer's new version must be seen
    assert S3Settings(endpoint="http://e").fsspec_options()["client_kwargs"]["endpoint_url"] == "http://e"
