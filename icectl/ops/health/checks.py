"""`icectl health`: the thresholds each figure is judged by, and the checks with their recommendations.

A threshold comes from, in this order (the first that has it wins): the table's property
``icectl.health.<key>``, the config file's ``[health]`` section (``<key> = value``), the default
below. Defaults follow what the engines themselves use to decide that maintenance is due; the
source of each is noted next to it. Some defaults come from a table property (the manifest and
file target sizes, the metadata log's length): the table's own value, as its writers use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from icectl.config import parse_size
from icectl.errors import CorruptInputError
from icectl.humanize import fmt_bytes
from icectl.ops.health.result import HealthCheck
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import MANIFEST_TARGET_SIZE_BYTES, METADATA_PREVIOUS_VERSIONS_MAX, IntProperty

PROPERTY_PREFIX = "icectl.health."

# Spark/Java's write.target-file-size-bytes (TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT).
TARGET_FILE_SIZE_BYTES = IntProperty("write.target-file-size-bytes", 512 * 1024 * 1024, minimum=1)

TABLE_DEFAULT = None  # a default that is a property of the table (see _table_default)
MAX_REWRITE_VERSION = 3  # rewrite-data-files writes v1-v3 tables
SPARK_DELETE_RATIO = 0.3  # rewrite_data_files' delete-ratio-threshold default


@dataclass(frozen=True)
class Threshold:
    key: str
    kind: str  # count | ratio | bytes | version
    default: float | int | None  # TABLE_DEFAULT: derived from the table's properties
    help: str


THRESHOLDS: dict[str, Threshold] = {t.key: t for t in (
    # The anchor for "too many manifests": query planning reads every manifest.
    Threshold("manifest-count", "count", 500, "manifests at or above this many need compacting"),
    # 100: Java's commit.manifest.min-count-to-merge (a merging append merges from 100 manifests on).
    Threshold("small-manifests-count", "count", 100, "at least this many manifests ..."),
    # ... averaging under commit.manifest.target-size-bytes (8 MiB), RewriteManifests' target.
    Threshold("small-manifests-mean-bytes", "bytes", TABLE_DEFAULT,
              "... averaging under this size (default: the table's commit.manifest.target-size-bytes)"),
    # RemoveSnapshots under the table's policy (history.expire.*): one snapshot past it is due.
    Threshold("expirable-snapshots", "count", 1, "snapshots the table's retention policy would expire"),
    # Not an engine setting: each snapshot is ~0.5-1 KB of the metadata JSON that every commit
    # rewrites and every reader parses; 1,000 of them make it about a megabyte.
    Threshold("snapshot-count", "count", 1000, "snapshots in the metadata"),
    # write.metadata.previous-versions-max (100) + the current file: what Java keeps in the log.
    Threshold("metadata-file-count", "count", TABLE_DEFAULT,
              "metadata files above this many (default: write.metadata.previous-versions-max + 1)"),
    # Spark rewrite_data_files: min-file-size-bytes = 75% of the target file size ...
    Threshold("small-file-size-ratio", "ratio", 0.75, "a data file under this share of the target size is small"),
    # ... and min-input-files = 5: fewer small files are not worth a rewrite.
    Threshold("small-file-count", "count", 5, "at least this many small files ..."),
    # Every partition write ends with one remainder file under the target: a table written in
    # healthy batches has up to about half of its files small; more means many small writes.
    Threshold("small-file-ratio", "ratio", 0.5, "... making up more than this share of the data files"),
    # Spark rewrite_data_files: delete-ratio-threshold = 0.3 (deleted rows / rows of a data file).
    Threshold("deleted-row-ratio", "ratio", SPARK_DELETE_RATIO, "deleted rows per data row at or above this"),
    # The same 0.3 applied to files: from about one delete file per three data files reads pay
    # more for opening delete files than for the deletes themselves ...
    Threshold("delete-file-ratio", "ratio", 0.3, "delete files (and DVs) per data file at or above this ..."),
    # ... once there are rewrite_position_delete_files' min-input-files (5) of them.
    Threshold("delete-file-count", "count", 5, "... when there are at least this many delete files"),
    # v1 has no sequence numbers, row-level deletes or row lineage; engines write v2 by default.
    Threshold("min-format-version", "version", 2, "format versions below this are flagged"),
    # Statistics a table keeps (someone computes them) describe the snapshot they were computed for:
    # one commit later they are out of date, as expirable snapshots are one snapshot past the policy.
    Threshold("partition-stats-lag", "count", 1,
              "commits since the newest partition statistics (tables that have them) at or above this"),
    # remove_orphan_files' own cutoff (3 days) already spares files of commits in flight.
    Threshold("orphan-file-count", "count", 1, "orphan files (with --orphans) at or above this"),
)}


def _parse(t: Threshold, raw: Any, where: str) -> float | int:
    try:
        if isinstance(raw, bool):
            raise ValueError(raw)
        if t.kind == "bytes":
            return parse_size(raw if isinstance(raw, int) else str(raw))
        if t.kind == "ratio":
            value: float | int = float(raw)
        else:
            value = int(str(raw).strip()) if not isinstance(raw, int) else raw
        if value < 0:
            raise ValueError(raw)
        return value
    except ValueError:
        what = {"bytes": "a size", "ratio": "a number"}.get(t.kind, "a whole number")
        raise CorruptInputError(f"health threshold {t.key} = {raw!r} in {where} is not {what} (0 or more)",
                                hint=f"fix or remove it ({t.help})") from None


def check_config(section: Mapping[str, Any], source: str | None) -> dict[str, float | int]:
    """The ``[health]`` section of the config, each key known and each value parsed."""
    out: dict[str, float | int] = {}
    where = f"[health] of {source}" if source else "[health]"
    for key, raw in section.items():
        if key not in THRESHOLDS:
            raise CorruptInputError(f"unknown key {key!r} in {where}", path=source,
                                    hint=f"known keys: {', '.join(THRESHOLDS)}")
        out[key] = _parse(THRESHOLDS[key], raw, where)
    return out


def _table_default(key: str, md: TableMetadata) -> float | int:
    if key == "small-manifests-mean-bytes":
        return MANIFEST_TARGET_SIZE_BYTES.parse(md.properties)
    return METADATA_PREVIOUS_VERSIONS_MAX.parse(md.properties) + 1  # metadata-file-count


def thresholds_for(md: TableMetadata, config: Mapping[str, float | int]) -> dict[str, float | int]:
    """Every threshold for this table: its ``icectl.health.*`` properties over the config over the defaults."""
    out: dict[str, float | int] = {}
    for key, t in THRESHOLDS.items():
        raw = md.properties.get(PROPERTY_PREFIX + key)
        if raw is not None:
            out[key] = _parse(t, raw, f"table property {PROPERTY_PREFIX}{key}")
        elif key in config:
            out[key] = config[key]
        else:
            out[key] = t.default if t.default is not TABLE_DEFAULT else _table_default(key, md)
    for key in md.properties:
        if key.startswith(PROPERTY_PREFIX) and key[len(PROPERTY_PREFIX):] not in THRESHOLDS:
            raise CorruptInputError(f"unknown table property {key}",
                                    hint=f"health thresholds are {PROPERTY_PREFIX}<key> with key one of: "
                                         f"{', '.join(THRESHOLDS)}")
    return out


# --------------------------------------------------------------------------- the checks


@dataclass(frozen=True)
class Commands:
    """How the recommendations name the table: icectl's own address and Spark's procedure call."""

    table: str  # as given on the command line
    spark_catalog: str  # the catalog in Spark's CALL (a placeholder when the table has none)
    spark_table: str

    def icectl(self, command: str, *args: str) -> Advice:
        return Advice(command, " ".join(("icectl", command, _quote(self.table), *args)))

    def spark(self, procedure: str, options: str = "") -> Advice:
        extra = f", options => map({options})" if options else ""
        return Advice(procedure, f"CALL {self.spark_catalog}.system.{procedure}(table => '{self.spark_table}'{extra})")


@dataclass(frozen=True)
class Advice:
    """A recommendation: the command (icectl's, or Spark's procedure) and the line to run."""

    command: str
    text: str


def _quote(text: str) -> str:
    """``text`` as one shell word (table paths may hold spaces)."""
    if text and all(c.isalnum() or c in "._-/:=@+" for c in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


_OPS: dict[str, Callable[[float, float], bool]] = {">=": lambda v, t: v >= t, ">": lambda v, t: v > t,
                                                  "<": lambda v, t: v < t}


def _check(cid: str, title: str, unit: str, value: float | int | None, op: str, threshold: float | int,
           message: str, advice: Advice | None, *, applies: bool = True) -> HealthCheck:
    crossed = applies and value is not None and _OPS[op](value, threshold)
    return HealthCheck(id=cid, section=cid.rsplit(".", 1)[0], title=title, value=value, threshold=threshold,
                       unit=unit, comparison=op, crossed=crossed, message=message,
                       recommendation=advice.text if crossed and advice else None,
                       command=advice.command if crossed and advice else None)


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.2%}"


def evaluate(doc: dict[str, Any], th: Mapping[str, float | int], cmd: Commands) -> list[HealthCheck]:
    """The checks of one table's figures (the health document's sections) against ``th``."""
    snaps, meta, mans = doc["snapshots"], doc["metadata_files"], doc["manifests"]
    data, dels = doc["data_files"], doc["delete_files"]
    lag = doc["partition_stats_files"]
    compact = cmd.icectl("compact") if mans["mergeable_count"] else None
    expirable = snaps["expirable_count"]

    def rewrite(*option: str) -> Advice:
        """icectl rewrite-data-files with a Spark option, or Spark's procedure where icectl does not
        rewrite yet (format v4)."""
        if doc["format_version"] > MAX_REWRITE_VERSION:
            return cmd.spark("rewrite_data_files", ", ".join(f"'{o}'" for o in option))
        return cmd.icectl("rewrite-data-files", *(f"--{o}" if i % 2 == 0 else o for i, o in enumerate(option)))

    checks = [
        _check("snapshots.expirable", "Expirable snapshots", "count", expirable, ">=", th["expirable-snapshots"],
               f"{expirable} of {snaps['count']} snapshots are past the table's retention policy "
               f"(threshold {th['expirable-snapshots']})", cmd.icectl("expire-snapshots"),
               applies=expirable is not None),
        _check("snapshots.count", "Snapshots", "count", snaps["count"], ">", th["snapshot-count"],
               f"{snaps['count']} snapshots (threshold {th['snapshot-count']})",
               # The policy keeps them all: a shorter retention is what helps (nothing, with gc disabled).
               None if not snaps["gc_enabled"] else cmd.icectl("expire-snapshots") if expirable
               else cmd.icectl("expire-snapshots", "--older-than", "1d")),
        _check("metadata_files.count", "Metadata files", "count", meta["count"], ">", th["metadata-file-count"],
               f"{meta['count']} metadata files (threshold {th['metadata-file-count']})",
               # Java then deletes the files its trimmed metadata log drops, from the next commit on
               # (already on: the next commit trims the log to write.metadata.previous-versions-max).
               None if meta.get("delete_after_commit")
               else cmd.icectl("properties set", "write.metadata.delete-after-commit.enabled=true")),
        _check("manifests.count", "Manifests", "count", mans["count"], ">=", th["manifest-count"],
               f"{mans['count']} manifests (threshold {th['manifest-count']}); compact would merge "
               f"{mans['mergeable_count']}", compact),
        _check("manifests.small", "Small manifests", "bytes", mans["mean_bytes"], "<",
               th["small-manifests-mean-bytes"],
               f"{mans['count']} manifests averaging {fmt_bytes(mans['mean_bytes'] or 0)} (threshold: at least "
               f"{th['small-manifests-count']} averaging under {fmt_bytes(th['small-manifests-mean-bytes'])})",
               compact, applies=mans["count"] >= th["small-manifests-count"]),
        _check("data_files.small", "Small data files", "ratio", data["small_file_ratio"], ">",
               th["small-file-ratio"],
               f"{data['small_file_count']} of {data['count']} data files ({_pct(data['small_file_ratio'])}) are "
               f"under {fmt_bytes(data['small_file_bytes'])} (threshold: more than {_pct(th['small-file-ratio'])} "
               f"and at least {th['small-file-count']})",
               rewrite(), applies=data["small_file_count"] >= th["small-file-count"]),
        _check("delete_files.deleted_rows", "Deleted rows", "ratio", dels["deleted_row_ratio"], ">=",
               th["deleted-row-ratio"],
               f"{dels['delete_record_count']} deleted rows for {data['record_count']} data rows "
               f"({_pct(dels['deleted_row_ratio'])}, threshold {_pct(th['deleted-row-ratio'])})",
               # Spark's default delete-ratio-threshold is 0.3: the plain call picks those files.
               rewrite(*(() if th["deleted-row-ratio"] == SPARK_DELETE_RATIO
                         else ("delete-ratio-threshold", str(th["deleted-row-ratio"]))))),
        _check("delete_files.ratio", "Delete files", "ratio", dels["delete_file_ratio"], ">=",
               th["delete-file-ratio"],
               f"{dels['delete_file_count']} delete files and DVs for {data['count']} data files "
               f"({_pct(dels['delete_file_ratio'])}, threshold {_pct(th['delete-file-ratio'])} and at least "
               f"{th['delete-file-count']})",
               _delete_file_advice(doc, cmd, rewrite),
               applies=dels["delete_file_count"] >= th["delete-file-count"]),
        _check("format_version.min", "Format version", "count", doc["format_version"], "<", th["min-format-version"],
               f"format version {doc['format_version']} (threshold: at least {th['min-format-version']})",
               cmd.icectl("upgrade", "--to", str(int(th["min-format-version"])))),
        _check("partition_stats_files.lag", "Partition statistics", "count", lag["snapshots_since"], ">=",
               th["partition-stats-lag"],
               f"{lag['snapshots_since']} commits since the newest partition statistics "
               f"(threshold {th['partition-stats-lag']})" if lag["count"] else "no partition statistics",
               cmd.icectl("compute-partition-stats"), applies=bool(lag["count"])),
    ]
    orphans = doc.get("orphans")
    if orphans is not None:
        checks.append(_check(
            "orphans.count", "Orphan files", "count", orphans["count"], ">=", th["orphan-file-count"],
            f"{orphans['count']} orphan files ({orphans['total_bytes']} bytes; threshold {th['orphan-file-count']})"
            if orphans["count"] is not None else f"orphan files not listed: {orphans.get('skipped')}",
            cmd.icectl("remove-orphan-files"), applies=orphans["count"] is not None))
    return checks


def _delete_file_advice(doc: dict[str, Any], cmd: Commands, rewrite: Callable[..., Advice]) -> Advice:
    """Equality deletes turn into positions without rewriting data; position delete files can be
    compacted on their own; DVs go away only by rewriting their data files."""
    dels, icectl_writes = doc["delete_files"], doc["format_version"] <= MAX_REWRITE_VERSION
    if dels["equality_delete_file_count"] and icectl_writes:
        return cmd.icectl("rewrite-position-delete-files", "--convert-equality-deletes")
    if dels["position_delete_file_count"]:
        return (cmd.icectl("rewrite-position-delete-files") if icectl_writes
                else cmd.spark("rewrite_position_delete_files"))
    return rewrite("delete-file-threshold", "1")


def recommendations(checks: list[HealthCheck]) -> list[str]:
    """The crossed checks' commands, each once, in check order."""
    return list(dict.fromkeys(c.recommendation for c in checks if c.crossed and c.recommendation))
