"""The gate every command that writes or deletes passes before it touches anything.

Read-only commands (inspect, validate) show what they can of damaged tables. Every write passes
:func:`icectl.table.commit.commit`, which refuses a table away from its home
(:func:`check_table_home`, exit 6) before it reads or builds anything and checks each freshly read
base with :func:`check_metadata_sound`, so nothing is committed through a ``cp -r`` copy nor on
metadata Iceberg Java would refuse. Commands that plan, write side files (manifests, partition
statistics) or delete before or without a commit (expire-snapshots, remove-orphan-files, compact,
add-files, remove-files, upgrade, cherrypick, publish, compute-partition-stats, drop) call
:func:`check_writable` first; register checks the file it is given (:func:`check_metadata_home`).
tests/cli/test_write_gate.py runs every writing command of the CLI on a copy.
"""

from __future__ import annotations

from icectl.errors import CorruptInputError, RefusedError
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import WRITE_METADATA_PATH
from icectl.spec.soundness import metadata_problems
from icectl.storage import basename, parent
from icectl.table import Table, home_refusal
from icectl.table.delete_fence import file_identity, table_folder


def check_metadata_sound(metadata: TableMetadata, location: str) -> None:
    """Raise :class:`~icectl.errors.CorruptInputError` (exit 4) for metadata that Iceberg Java
    refuses to load (dangling refs, duplicate snapshot ids, parent cycles, out-of-range numbers).

    Planning on such metadata is unsafe: a branch naming a missing snapshot retains nothing, so
    expiry would delete every snapshot's files. The first problem is named; validate lists them all.
    """
    problems = metadata_problems(metadata)
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise CorruptInputError(
            f"refusing to write: table metadata {location}: {problems[0].message}{more}", path=location,
            hint=f"'icectl validate {_table_of(location)}' lists every problem; restore an earlier "
                 "metadata version (see its metadata-log) or repair the file")


def check_table_home(table: Table) -> None:
    """Raise :class:`~icectl.errors.RefusedError` (exit 6) when the folder the table was found in
    and the location its metadata names differ (a copied table would work on the original).

    Compared as :func:`~icectl.table.delete_fence.file_identity` (real paths on a local disk). A catalog
    table without a folder of its own is not checked: its location is where the catalog put it.
    """
    refusal = home_refusal(table_folder(table), table.metadata.location, table.metadata_location)
    if refusal is not None:
        raise refusal


def check_metadata_home(metadata_file: str, metadata: TableMetadata) -> None:
    """:func:`check_table_home` for a metadata file alone (what register is given): a file in a
    ``<folder>/metadata/`` whose ``location`` is not ``<folder>`` (nor its ``write.metadata.path``
    that folder) is a copied or moved table's, and a catalog entry pointing at it would write into
    and delete from the location it names. RefusedError (exit 6)."""
    directory = parent(metadata_file)
    location = metadata.location
    if basename(directory) != "metadata" or not location:
        return
    own = metadata.properties.get(WRITE_METADATA_PATH)
    if file_identity(parent(directory)) == file_identity(location) or (own and file_identity(own) == file_identity(
            directory)):
        return
    raise RefusedError(
        f"table folder {parent(directory)} is not the location its metadata names ({location}): a copied or "
        "moved table would write into and delete from that location", path=metadata_file,
        hint=f"register the metadata file under {location}/metadata instead; to make this folder a table of its "
             "own, rewrite its metadata and manifests to the new location (Iceberg's rewrite_table_path)")


def check_writable(table: Table) -> None:
    """All the checks a writing command makes before it plans, writes or deletes anything."""
    check_metadata_sound(table.metadata, table.metadata_location)
    check_table_home(table)


def _table_of(metadata_location: str) -> str:
    """The table folder of a ``<table>/metadata/vN.metadata.json`` path, for the hint."""
    folder = parent(metadata_location)
    return parent(folder) if folder.rstrip("/").endswith("/metadata") else metadata_location
