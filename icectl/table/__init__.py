"""A loaded table: where it is, its current metadata, and the FileIO to read its files.

The FileIO a ``Table`` holds is gated (:class:`HomeGate`): the first write, delete, rename or mkdir
through it checks that the folder the table was found in is the location its metadata names, and
refuses (exit 6) a copied or moved table before any byte is written. Every writer (the snapshot
writer, side files such as partition statistics, deletes) goes through ``table.io``, so none can
forget the check; commits go through the catalog's own FileIO and :func:`icectl.table.commit.commit`,
which checks the same before it reads the base.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from typing import Any

from icectl.catalog import Catalog, FoundTable, TableAddress, find_in_catalog, find_table
from icectl.catalog.hadoop_layout import is_version_file
from icectl.config import Config, load_config
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, RefusedError, UsageError
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, basename, join, parent, path_identity

_GZIP_MAGIC = b"\x1f\x8b"


def home_refusal(folder: str | None, location: str | None, metadata_location: str) -> RefusedError | None:
    """The refusal for a table found in ``folder`` whose metadata names ``location``, when the two
    differ (a ``cp -r`` copy or a moved table would write into and delete from ``location``); None
    when they are one folder (compared as real paths on a local disk) or the table has no folder."""
    if folder is None or not location or path_identity(folder) == path_identity(location):
        return None
    return RefusedError(
        f"table folder {folder} is not the location its metadata names ({location}): a copied or moved "
        "table would write into and delete from that location", path=metadata_location,
        hint=f"to work on the table at {location}, address it there; to make this folder a table of its "
             "own, rewrite its metadata and manifests to the new location (Iceberg's rewrite_table_path) "
             "and register the result")


class HomeGate:
    """A FileIO write gate (:attr:`icectl.storage.FileIO.write_gate`) for one table: refuses every
    change when the table is away from its home (:func:`home_refusal`). Judged once, at the first
    change; picklable, so a Spark executor's copy of the FileIO refuses alike."""

    def __init__(self, folder: str | None, location: str | None, metadata_location: str) -> None:
        self.folder, self.location, self.metadata_location = folder, location, metadata_location
        self._refusal: RefusedError | bool | None = False  # False: not judged yet

    def __call__(self, path: str) -> None:
        if self._refusal is False:
            self._refusal = home_refusal(self.folder, self.location, self.metadata_location)
        if isinstance(self._refusal, RefusedError):
            raise self._refusal

    def __getstate__(self) -> dict[str, Any]:
        return {"folder": self.folder, "location": self.location, "metadata_location": self.metadata_location,
                "_refusal": False}


@dataclass
class Table:
    address: TableAddress
    metadata: TableMetadata
    io: FileIO
    catalog: Catalog | None = None  # the catalog it was found in; commits to catalog tables need it

    def __post_init__(self) -> None:
        self.io = self.io.gated(HomeGate(self.home_folder, self.metadata.location, self.metadata_location))

    @property
    def home_folder(self) -> str | None:
        """The folder the table was found in, or None (a catalog table: the catalog says where)."""
        address = self.address
        if address.table_dir is not None:
            return address.table_dir
        if address.catalog is None:
            # A bare vN.metadata.json in a metadata/ folder is committed to that folder's table
            # (icectl.table.commit.operations_for): the same folder is its home.
            directory = parent(address.metadata_location)
            if is_version_file(basename(address.metadata_location)) and basename(directory) == "metadata":
                return parent(directory)
        return None

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
