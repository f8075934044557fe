"""The loaded table's own facts: where its manifests go."""

from __future__ import annotations

from icectl.catalog import TableAddress
from icectl.errors import CorruptInputError
from icectl.spec.metadata import parse_table_metadata
from icectl.storage import FileIO
from icectl.table import Table

MD = (b'{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"s3://b/wh/t",'
      b'"last-sequence-number":0,"last-updated-ms":1,"last-column-id":0,"current-schema-id":0,'
      b'"schemas":[{"type":"struct","schema-id":0,"fields":[]}],"default-spec-id":0,'
      b'"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,'
      b'"sort-orders":[{"order-id":0,"fields":[]}],'
      b'"properties":{"write.metadata.path":"s3://b/elsewhere"}}')


def _table(location: str, table_dir: str | None) -> Table:
    md = parse_table_metadata(MD).replace(location=location)
    return Table(TableAddress("x/metadata/v1.metadata.json", "x", table_dir=table_dir), md, FileIO())


def test_metadata_folder_is_under_the_location() -> None:
    # write.metadata.path moves only the metadata JSON files (catalog.operations), not manifests.
    assert _table("s3://b/wh/t", "/ignored").metadata_folder == "s3://b/wh/t/metadata"


def test_metadata_folder_falls_back_to_the_table_directory() -> None:
    assert _table("", "/wh/t").metadata_folder == "/wh/t/metadata"


def test_in_file_names_the_file_once() -> None:
    e = CorruptInputError("truncated Avro file").in_file("/t/m.avro")
    assert (e.message, e.path) == ("truncated Avro file in /t/m.avro", "/t/m.avro")
    assert e.in_file("/t/m.avro").message == "truncated Avro file in /t/m.avro"
