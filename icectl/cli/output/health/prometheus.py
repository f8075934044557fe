"""`icectl health --prometheus FILE`: the health documents as node_exporter's textfile collector reads them.

Prometheus' text exposition format: per metric a ``# HELP`` and a ``# TYPE`` line, then one sample
per table (``icectl_table_snapshots{table="db.t"} 11``). Every value is the health document's,
sizes in bytes, ages in seconds (Prometheus' base units; the document's milliseconds / 1000).
A table that could not be read has ``icectl_table_health_up`` 0 and no other sample, so an alert
can tell a broken table from a healthy one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

# (name, help, labels(doc) -> [(extra labels, value)])
Sample = tuple[dict[str, str], float | int | None]


def _one(get: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], list[Sample]]:
    return lambda d: [({}, get(d))]


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _checks(field: str) -> Callable[[dict[str, Any]], list[Sample]]:
    def samples(d: dict[str, Any]) -> list[Sample]:
        return [({"check": c["id"]}, c[field]) for c in d["checks"]]
    return samples


METRICS: list[tuple[str, str, Callable[[dict[str, Any]], list[Sample]]]] = [
    ("icectl_table_healthy", "1 when no health check of the table is crossed, else 0.", _one(lambda d: d["healthy"])),
    ("icectl_table_check_crossed", "1 when the health check is crossed.", _checks("crossed")),
    ("icectl_table_check_value", "The figure a health check judges.", _checks("value")),
    ("icectl_table_check_threshold", "The threshold of a health check.", _checks("threshold")),
    ("icectl_table_format_version", "The table's format version.", _one(lambda d: d["format_version"])),
    ("icectl_table_snapshots", "Snapshots in the table metadata.", _one(lambda d: d["snapshots"]["count"])),
    ("icectl_table_expirable_snapshots", "Snapshots the table's retention policy would expire.",
     _one(lambda d: d["snapshots"]["expirable_count"])),
    ("icectl_table_oldest_snapshot_age_seconds", "Age of the oldest snapshot.",
     _one(lambda d: _seconds(d["snapshots"]["oldest_age_ms"]))),
    ("icectl_table_metadata_files", "Metadata files: the current one and the metadata log's that exist.",
     _one(lambda d: d["metadata_files"]["count"])),
    ("icectl_table_metadata_files_bytes", "Bytes of those metadata files.",
     _one(lambda d: d["metadata_files"]["total_bytes"])),
    ("icectl_table_manifests", "Manifests of the current snapshot, by content.",
     lambda d: [({"content": "data"}, d["manifests"]["data_count"]),
                ({"content": "deletes"}, d["manifests"]["delete_count"])]),
    ("icectl_table_manifests_bytes", "Bytes of the current snapshot's manifests.",
     _one(lambda d: d["manifests"]["total_bytes"])),
    ("icectl_table_mergeable_manifests", "Manifests `icectl compact` would rewrite.",
     _one(lambda d: d["manifests"]["mergeable_count"])),
    ("icectl_table_data_files", "Live data files.", _one(lambda d: d["data_files"]["count"])),
    ("icectl_table_data_files_bytes", "Bytes of the live data files.", _one(lambda d: d["data_files"]["total_bytes"])),
    ("icectl_table_records", "Records in the live data files.", _one(lambda d: d["data_files"]["record_count"])),
    ("icectl_table_small_data_files", "Live data files under the small-file size.",
     _one(lambda d: d["data_files"]["small_file_count"])),
    ("icectl_table_delete_files", "Live delete files by kind (position, equality, dv).",
     lambda d: [({"kind": "position"}, d["delete_files"]["position_delete_file_count"]),
                ({"kind": "equality"}, d["delete_files"]["equality_delete_file_count"]),
                ({"kind": "dv"}, d["delete_files"]["dv_count"])]),
    ("icectl_table_delete_records", "Deleted rows the live delete files and DVs hold.",
     _one(lambda d: d["delete_files"]["delete_record_count"])),
    ("icectl_table_orphan_files", "Orphan files remove-orphan-files would delete (with --orphans).",
     lambda d: [({}, d["orphans"]["count"])] if d.get("orphans") else []),
    ("icectl_table_health_checked_timestamp_seconds", "When the table was checked.",
     _one(lambda d: _seconds(d["checked_at_ms"]))),
]
UP = ("icectl_table_health_up", "1 when icectl could read the table, 0 when its health could not be computed.")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(v: float | int | bool) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return repr(float(v)) if isinstance(v, float) else str(int(v))


def _line(name: str, labels: dict[str, str], value: float | int | bool) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {_value(value)}"


def prometheus_text(docs: Iterable[dict[str, Any]]) -> str:
    """The exposition text of the health documents (a document with ``error``: a table that failed)."""
    docs = list(docs)
    ok = [d for d in docs if "error" not in d]
    out = [f"# HELP {UP[0]} {UP[1]}", f"# TYPE {UP[0]} gauge"]
    out += [_line(UP[0], {"table": d["table"]}, "error" not in d) for d in docs]
    for name, text, samples in METRICS:
        lines = [_line(name, {"table": d["table"], **labels}, v) for d in ok for labels, v in samples(d)
                 if v is not None]
        if lines:
            out += [f"# HELP {name} {text}", f"# TYPE {name} gauge", *lines]
    return "\n".join(out) + "\n"
