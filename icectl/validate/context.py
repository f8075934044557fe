"""What the rule areas share during one validation run: the table, the reporter and read caches."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icectl.codec.manifest_list_delta import ListDecoder
from icectl.codec.puffin import PuffinFileMetadata, read_puffin_footer
from icectl.errors import IcectlError, NotFoundError
from icectl.spec.manifest import ManifestFile, single_valued_ids
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import Schema
from icectl.storage import FileIO
from icectl.validate.rules import Reporter

if TYPE_CHECKING:
    import pyarrow as pa


@functools.cache
def checker_fingerprint() -> str:
    """A hash of the source of the code that decides validate's findings (icectl/validate, codec and
    spec): part of every cached outcome's and list's key, so stored results of other code, an
    upgrade or a local edit, are never replayed (a hand-bumped version number can be forgotten)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in ("validate", "codec", "spec"):
        for source in sorted((root / package).rglob("*.py")):
            digest.update(source.relative_to(root).as_posix().encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


@dataclass
class LiveFile:
    """A live data or delete file, for the per-snapshot and ``--deep`` checks."""

    path: str
    size: int
    record_count: int
    file_format: str
    content: int
    entry: str


@dataclass
class ManifestSummary:
    """What the per-snapshot checks need from one manifest, kept after its entries are gone."""

    manifest: ManifestFile
    entries: int = 0
    max_file_sequence_number: int | None = None
    max_file_sequence_entry: str | None = None
    # Paths of the live data files: a list from the entry loop, an Arrow string array (a slice of the
    # batch's column) from the column screen, ~100 bytes an entry instead of ~160 as Python strings;
    # only the delete rules ask, and only which DV and position-delete targets it holds (live_among).
    live_data_files: list[str] | pa.Array | pa.ChunkedArray = field(default_factory=list)
    # (referenced data file, entry) of live DVs and of live position delete files naming one file
    dv_targets: list[tuple[str, str]] = field(default_factory=list)
    position_delete_targets: list[tuple[str, str]] = field(default_factory=list)
    live_files: list[LiveFile] = field(default_factory=list)  # only with --deep
    # v3: rows of data files written with a null first_row_id, i.e. the ids the manifest's own
    # first_row_id hands out by inheritance (its real row-id range; files with ids keep theirs)
    inherited_rows: int = 0
    # v3: row-id ranges of live data files written with their own first_row_id, adjacent ones merged
    explicit_row_ids: list[tuple[int, int]] = field(default_factory=list)
    delete_entries: int = 0  # entries of delete files (their checks read Puffin files: not cached)
    # The entries' totals (EntryTotals), for a v4 root naming a leaf checked before: its manifest_stats
    totals: Any = None


@dataclass
class Context:
    metadata: TableMetadata
    io: FileIO
    metadata_location: str
    reporter: Reporter
    deep: bool = False
    raw: dict[str, Any] | None = None  # the metadata JSON as read
    summaries: dict[str, ManifestSummary] = field(default_factory=dict)
    _puffin: dict[str, PuffinFileMetadata | IcectlError] = field(default_factory=dict)
    _schemas: dict[str, Schema | None] = field(default_factory=dict)
    _single_valued: frozenset[int] | None = None
    _lists: ListDecoder | None = None
    # outcome_cache's hash of what every manifest check reads besides the manifest (None: outcomes
    # are not cached in this run; False: not worked out yet)
    outcome_base: str | bool | None = False

    @property
    def lists(self) -> ListDecoder:
        """Decodes manifest lists, each row copied from an earlier list decoded once (a table of N
        fast appends has N^2/2 rows)."""
        if self._lists is None:
            self._lists = ListDecoder(format_version=self.metadata.format_version)
        return self._lists

    @property
    def single_valued_ids(self) -> frozenset[int]:
        """Column ids with at most one value per row in every schema of the table (entry-values rule)."""
        if self._single_valued is None:
            self._single_valued = single_valued_ids(self.metadata.schemas)
        return self._single_valued

    def puffin_footer(self, path: str) -> PuffinFileMetadata | IcectlError:
        """The footer of a Puffin file, read once; an error is returned (the caller reports it)."""
        if path not in self._puffin:
            try:
                size = self.io.size(path)
                self._puffin[path] = read_puffin_footer(lambda off, n: self.io.read_range(path, off, n), size)
            except (IcectlError, FileNotFoundError) as e:
                self._puffin[path] = e if isinstance(e, IcectlError) else NotFoundError(str(e), path=path)
        return self._puffin[path]

    def manifest_schema(self, schema_json: str | None) -> Schema | None:
        """The table schema a manifest was written with (its ``schema`` key), parsed once per text."""
        if schema_json is None:
            return None
        if schema_json not in self._schemas:
            try:
                self._schemas[schema_json] = Schema.from_json(json.loads(schema_json))
            except (ValueError, IcectlError, TypeError, KeyError):
                self._schemas[schema_json] = None
        return self._schemas[schema_json]
