"""The result of `icectl health`: one table's health document (the JSON that --json prints, the
Prometheus file and the HTML page are made from, and that the terminal report draws)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.errors import ExitCode
from icectl.results import NOT_JSON, UNSET, CommandResult, Part, Unset


@dataclass
class HealthCheck(Part):
    """One figure against its threshold: ``crossed`` when ``value <comparison> threshold``."""

    id: str  # section.name, e.g. manifests.count
    section: str  # the document section the figure comes from
    title: str
    value: float | int | None
    threshold: float | int
    unit: str  # count | bytes | ratio | ms
    crossed: bool
    message: str
    recommendation: str | None  # the command to run; null when nothing is crossed or nothing helps
    comparison: str = ">="  # how value and threshold compare when crossed: >=, > or <
    command: str | None = field(default=None, metadata=NOT_JSON)  # the recommendation's command, by name


@dataclass(kw_only=True)
class HealthResult(CommandResult):
    """``icectl health TABLE``: the figures that decide maintenance, each check, what to run."""

    view: ClassVar[str] = "health"
    terminal_report: ClassVar[str] = "icectl.cli.output.health.terminal:health_report"
    one_line: ClassVar[str] = "icectl.cli.output.health.terminal:health_line"

    table: str
    location: str | None
    format_version: int
    current_snapshot_id: int | None
    checked_at_ms: int
    healthy: bool
    snapshots: dict[str, Any]
    metadata_files: dict[str, Any]
    manifests: dict[str, Any]
    data_files: dict[str, Any]
    delete_files: dict[str, Any]
    row_lineage: dict[str, Any]
    timeline: list[dict[str, Any]]
    partition_stats: dict[str, Any] | None
    partition_stats_files: dict[str, Any] = field(default_factory=dict)  # count, snapshots_since (the newest's)
    orphans: dict[str, Any] | Unset = UNSET  # only with --orphans
    checks: list[HealthCheck] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    thresholds: dict[str, float | int] = field(default_factory=dict)  # every threshold used, by key

    def finish(self) -> HealthResult:
        """Set ``healthy``, the exit code and the title from the checks."""
        crossed = [c for c in self.checks if c.crossed]
        self.healthy = not crossed
        self.exit_code = ExitCode.OK if self.healthy else ExitCode.FINDINGS
        self.title = (f"Health of {self.table}: healthy" if self.healthy else
                      f"Health of {self.table}: {len(crossed)} check(s) need attention")
        return self
