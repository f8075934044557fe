"""A loaded table: where it is, its current metadata, and the FileIO to read its files."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass

from icectl.catalog import Catalog, FoundTable, TableAddress, find_in_catalog, find_table
from icectl.config import Config, load_config
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, UsageError
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, join

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Table:
    address: TableAddress
    metadata: TableMetadata
    io: FileIO
    catalog: Catalog | None = None  # the catalog it was found in; commits to catalog tables need it

    @property
    def identifier(self) -> str:
        return self.address.identifier

    @property
    def metadata_location(self) -> str:
        return self.address.metadata_location

    @property
    def location(self) -> str | None:  # None: a v4 table whose catalog keeps its location
        return self.metadata.location

    @property
    def metadata_folder(self) -> str:
        """Where new manifests, manifest lists and v4 roots go: ``<location>/metadata`` (the table
        directory when the metadata has no location). ``write.metadata.path`` moves only the
        metadata JSON files (:mod:`icectl.catalog.operations`); file-system tables refuse it."""
        return join(self.metadata.location or self.address.table_dir or "", "metadata")

    def snapshot(self, snapshot_id: int | None = None, ref: str | None = None) -> Snapshot | None:
        """The snapshot by id, by branch/tag name, or the current one (None for an empty table)."""
        if snapshot_id is not None and ref is not None:
            raise UsageError("give either --snapshot or --ref, not both")
        if snapshot_id is not None:
            snap = self.metadata.snapshot_by_id(snapshot_id)
            if snap is None:
                raise NotFoundError(f"snapshot {snapshot_id} not found in table {self.identifier}",
                                    path=self.metadata_location,
                                    hint="list snapshots with 'icectl inspect snapshots'")
            return snap
        if ref is not None:
            if self.metadata.ref(ref) is None:
                raise NotFoundError(f"no branch or tag named '{ref}' in table {self.identifier}",
                                    path=self.metadata_location,
                                    hint="list refs with 'icectl inspect refs'")
            return self.metadata.snapshot_for_ref(ref)
        return self.metadata.current_snapshot()


def read_table_metadata(io: FileIO, location: str) -> TableMetadata:
    """Read and parse a metadata JSON file, gzip-compressed or not."""
    data = io.read(location)
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise CorruptInputError(f"corrupt gzip metadata file {location}: {e}", path=location) from None
    try:
        return parse_table_metadata(data)
    except IcectlError as e:
        raise e.in_file(location) from None


def load_table(address: str, config: Config | None = None, io: FileIO | None = None) -> Table:
    """Find a table by any accepted address and read its current metadata.

    ``address``: a ``*.metadata.json`` path or URL, a table directory, or
    ``[catalog.]namespace.table`` in the configured catalogs.
    """
    config = config or load_config()
    io = io or FileIO(s3=config.s3)
    return _table(find_table(address, config, io))


def load_catalog_table(catalog: Catalog, identifier: tuple[str, ...]) -> Table:
    """The table ``(*namespace, name)`` of an open catalog (what ``--all`` walks)."""
    return _table(find_in_catalog(catalog, identifier[:-1], identifier[-1]))


def _table(found: FoundTable) -> Table:
    metadata = (found.current.metadata if found.current is not None
                else read_table_metadata(found.io, found.address.metadata_location))
    return Table(address=found.address, metadata=metadata, io=found.io, catalog=found.catalog)
