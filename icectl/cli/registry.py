"""The root command's lazy command registry: every command's name and one-line help, no imports.

``icectl --help`` must not import every command module (and through them pyarrow, fastavro,
rich tables, catalogs ...): that made every start take half a second. The root group lists the
commands from :data:`COMMANDS` (``icectl inspect`` from :data:`INSPECT_COMMANDS`) and imports a
command's module only when that command runs, is asked for its help, or is completed
(``importlib.import_module``, by the names below: one of the run-time imports that
tests/unit/test_architecture.py allows). tests/cli/test_startup.py checks that the registry matches
what the modules define and that ``--help`` prints what the groups built eagerly would.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from gettext import gettext as _
from typing import Any, ClassVar

import typer
import typer.main
from typer import _click
from typer._click.utils import make_default_short_help
from typer.core import TyperGroup
from typer.exceptions import Abort

from icectl.cli.coercion import skip_needless_coercion


@dataclass(frozen=True)
class LazyCommand:
    """Where a top-level command is defined, and the first paragraph of its help."""

    module: str  # icectl.cli.<module>, e.g. commands.maintenance
    register: str  # the module's function that adds it (and its siblings) to a Typer app
    help: str  # the first paragraph of the command's help: all that `icectl --help` shows of it


# In the order `icectl --help` lists them (commands first, then groups, as typer orders them).
COMMANDS: dict[str, LazyCommand] = {
    "list": LazyCommand("commands.catalog", "register",
                        "List the tables of a namespace, or of the whole catalog with --all."),
    "create": LazyCommand("commands.write", "register_create",
                          "Create an empty Iceberg table (metadata as Iceberg Java would write it)."),
    "add-files": LazyCommand("commands.write", "register",
                             "Register existing Parquet files in a table as one append snapshot."),
    "expire-snapshots": LazyCommand("commands.maintenance", "register",
                                    "Expire snapshots by retention policy, then delete the files no retained "
                                    "snapshot reaches."),
    "compact": LazyCommand("commands.maintenance", "register",
                           "Rewrite and merge manifests (data and delete manifests) into few, clustered ones."),
    "rewrite-data-files": LazyCommand("commands.maintenance", "register",
                                      "Compact small data files (and files heavy with deletes) into files of the "
                                      "target size."),
    "rewrite-position-delete-files": LazyCommand("commands.deletes", "register",
                                                 "Compact a v2 table's position delete files and drop deletes of "
                                                 "data files no longer live."),
    "health": LazyCommand("commands.health", "register",
                          "Which tables need maintenance: snapshots, metadata files, manifests, file sizes, delete "
                          "files."),
    "upgrade": LazyCommand("commands.upgrade", "register", "Upgrade a table's format version in one atomic commit."),
    "remove-files": LazyCommand("commands.remove_files", "register",
                                "Remove data files from a v4 table as one delete commit that writes one root "
                                "manifest."),
    "validate": LazyCommand("commands.validate", "register",
                            "Check a table against the spec: metadata, manifest lists, manifests, deletes (and "
                            "files with --deep)."),
    "rollback": LazyCommand("commands.snapshots", "register",
                            "Roll a branch back to an earlier snapshot of its own history."),
    "set-current": LazyCommand("commands.snapshots", "register",
                               "Set a branch (default main, the table's current snapshot) to any snapshot of the "
                               "table."),
    "cherrypick": LazyCommand("commands.snapshots", "register",
                              "Apply one snapshot's change to main, as Spark's cherrypick_snapshot."),
    "publish": LazyCommand("commands.snapshots", "register",
                           "Publish a staged write-audit-publish write: cherry-pick the snapshot whose summary "
                           "has wap.id."),
    "fast-forward": LazyCommand("commands.snapshots", "register",
                                "Fast-forward a branch to another branch or tag, as Spark's fast_forward."),
    "compute-partition-stats": LazyCommand("commands.partition_stats", "register",
                                           "Compute the partition statistics file of a snapshot and register it "
                                           "(Spark's compute_partition_stats)."),
    "remove-orphan-files": LazyCommand("commands.orphans", "register",
                                       "Delete the files under the table location that no snapshot or metadata "
                                       "file of the table reaches."),
    "register": LazyCommand("commands.table", "register",
                            "Register an existing table's metadata file under a name (Spark's register_table)."),
    "drop": LazyCommand("commands.table", "register",
                        "Drop a table from its catalog; with --purge, delete its files too (Spark's DROP TABLE "
                        "... PURGE)."),
    "inspect": LazyCommand("commands.inspect", "register",
                           "Show a table's metadata: overview, schema, snapshots, manifests, files, deletion "
                           "vectors."),
    "namespace": LazyCommand("commands.namespace", "register", "Create and list namespaces of a catalog."),
    "branch": LazyCommand("commands.refs", "register",
                          "Create, replace, drop and list branches (Spark's ALTER TABLE ... CREATE / REPLACE / "
                          "DROP BRANCH)."),
    "tag": LazyCommand("commands.refs", "register",
                       "Create, replace, drop and list tags (Spark's ALTER TABLE ... CREATE / REPLACE / DROP TAG)."),
    "properties": LazyCommand("commands.properties", "register",
                              "List, set and unset table properties (Spark's ALTER TABLE ... SET / UNSET "
                              "TBLPROPERTIES)."),
    "cache": LazyCommand("commands.cache", "register",
                         "The manifest cache: decoded manifests and manifest lists kept on the local disk between "
                         "runs (folder: $ICECTL_CACHE_DIR, [cache] dir, or ~/.cache/icectl; off: ICECTL_CACHE=off or "
                         "--no-cache)."),
}

# `icectl inspect VIEW`: the views of the metadata file alone, and those that read manifests
# (which import the manifest readers, Avro and Arrow).
INSPECT_COMMANDS: dict[str, LazyCommand] = {
    "table": LazyCommand("commands.inspect", "register_views",
                         "Overview: format, location, uuid, current snapshot, schema, spec, sort order, properties, "
                         "totals."),
    "schema": LazyCommand("commands.inspect", "register_views",
                          "Columns of the current (or a given) schema with field ids, types and v3 defaults."),
    "snapshots": LazyCommand("commands.inspect", "register_views",
                             "Every snapshot (Spark's `snapshots` metadata table)."),
    "history": LazyCommand("commands.inspect", "register_views",
                           "The snapshot log: when each snapshot became current (Spark's `history`)."),
    "refs": LazyCommand("commands.inspect", "register_views",
                        "Branches and tags with their retention settings (Spark's `refs`)."),
    "metadata-log": LazyCommand("commands.inspect", "register_views",
                                "Previous metadata files (Spark's `metadata_log_entries`)."),
    "manifests": LazyCommand("commands.inspect_manifests", "register",
                             "Manifests of a snapshot's manifest list (Spark's `manifests`)."),
    "files": LazyCommand("commands.inspect_manifests", "register",
                         "Live data, delete and DV files of a snapshot (Spark's `files`)."),
    "entries": LazyCommand("commands.inspect_manifests", "register",
                           "Manifest entries with status and sequence numbers, deleted ones included (Spark's "
                           "`entries`)."),
    "partitions": LazyCommand("commands.inspect_manifests", "register",
                              "Record and file counts per partition (Spark's `partitions`)."),
    "dvs": LazyCommand("commands.inspect_manifests", "register",
                       "Deletion vectors of a v3 snapshot, each read from its Puffin file and checked."),
    "tree": LazyCommand("commands.inspect_manifests", "register",
                        "The metadata tree of a snapshot: v4 root entries by type and status, leaves with their "
                        "counts, manifest DVs with cardinality (a manifest list's rows for older snapshots)."),
}


def load_commands(entry: LazyCommand, only: str | None = None) -> dict[str, _click.Command]:
    """Import ``entry``'s module and build the click commands its register function adds (``only``:
    just that one; typer spends ~0.3 ms building each)."""
    module = importlib.import_module(f"icectl.cli.{entry.module}")
    # The same settings as the root app, so a command's help reads as it did when the root
    # registered every command itself (typer takes the markup mode from the app that builds it).
    holder = typer.Typer(rich_markup_mode=None)
    getattr(module, entry.register)(holder)
    if only is not None:
        holder.registered_commands = [c for c in holder.registered_commands if c.name == only]
        holder.registered_groups = [g for g in holder.registered_groups if g.name == only]
    commands = dict(typer.main.get_group(holder).commands)
    skip_needless_coercion(commands.values())
    return commands


class LazyCommands(Mapping[str, _click.Command]):
    """The root's ``commands``: every name known up front, each command built on first access."""

    def __init__(self, index: Mapping[str, LazyCommand], path: tuple[str, ...] = ()) -> None:
        self.index = index
        self.path = path  # of the group: ("inspect",)
        self.loaded: dict[str, _click.Command] = {}

    def __getitem__(self, name: str) -> _click.Command:
        if name not in self.loaded:
            if name not in self.index:
                raise KeyError(name)
            built = load_commands(self.index[name], only=name)
            if name not in built:
                raise LookupError(f"icectl.cli.{self.index[name].module}.{self.index[name].register} "
                                  f"did not define the command '{name}'")
            # --help ends with the command's examples (imported with the command: --help of the root needs none)
            importlib.import_module("icectl.cli.docs.examples").add_epilogs(built[name], [*self.path, name])
            self.loaded[name] = built[name]
        return self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class LazyGroup(TyperGroup):
    """A group that lists the commands of its :attr:`index` without importing them (``--help``)
    and imports a command's module only when it is looked up (to run it, show its help or
    complete it). Subclasses name the index; typer builds the group (``typer.Typer(cls=...)``)."""

    index: ClassVar[Mapping[str, LazyCommand]] = {}
    path: ClassVar[tuple[str, ...]] = ()  # the group's command path

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        skip_needless_coercion([self])  # the group's own options (before its commands are set)
        # typer passes the commands registered on the Typer itself: none, they are all in the index.
        # (a read-only Mapping: add_command below refuses, so nothing writes to it as click might)
        self.commands = LazyCommands(self.index, self.path)  # type: ignore[assignment]

    def list_commands(self, ctx: _click.Context) -> list[str]:
        # TyperGroup's walks commands.items(), which would import every module.
        return list(self.index)

    def add_command(self, cmd: _click.Command, name: str | None = None) -> None:
        raise TypeError(f"add commands of this group to icectl.cli.registry, not to {type(self).__name__}")

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        # TyperGroup.format_commands fed from COMMANDS: click shortens only a help's first paragraph
        # (Command.get_short_help_str), so that paragraph gives the very line the real command would.
        limit = formatter.width - 6 - max(len(name) for name in self.index)
        rows = [(name, make_default_short_help(entry.help, limit).strip()) for name, entry in self.index.items()]
        with formatter.section(_("Commands")):
            formatter.write_dl(rows)


class RootGroup(LazyGroup):
    """``icectl``."""

    index = COMMANDS

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        """click's main, but a usage error (a bad option or argument, exit 2) is one line on stderr
        like every other error of icectl, not click's usage, hint and message over three lines."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except _click.exceptions.NoArgsIsHelpError as e:  # `icectl`, `icectl branch`: the help
            e.show()
            sys.exit(e.exit_code)
        except _click.ClickException as e:
            sys.stderr.write(usage_error_line(e) + "\n")
            sys.exit(e.exit_code)
        except Abort:
            sys.stderr.write("Aborted!\n")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def usage_error_line(e: _click.ClickException) -> str:
    """``icectl: error: <what>; see 'icectl <command> -h'``: click's message on one line."""
    text = " ".join(e.format_message().split()).rstrip(".")
    ctx = getattr(e, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        text += f"; see '{ctx.command_path} {ctx.help_option_names[0]}'"
    return f"icectl: error: {text}"


class InspectGroup(LazyGroup):
    """``icectl inspect``."""

    index = INSPECT_COMMANDS
    path = ("inspect",)
