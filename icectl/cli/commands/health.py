"""`icectl health`: which tables need maintenance, and what to run (also for cron and monitoring)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from icectl.cli.framework import TableTargets, command, load_config_and_io
from icectl.cli.options import JsonOpt
from icectl.cli.output.health.html import health_html
from icectl.cli.output.health.prometheus import prometheus_text
from icectl.errors import NotFoundError, UsageError
from icectl.ops.health import table_health
from icectl.ops.health.checks import check_config
from icectl.ops.health.result import HealthResult
from icectl.results import MultiResult, Result
from icectl.storage import FileIO


def health_cmd(
    tables: TableTargets,
    orphans: Annotated[bool, typer.Option(
        "--orphans", help="Also list orphan files, as remove-orphan-files --dry-run does (lists the table's "
                          "folders: slower).")] = False,
    prometheus: Annotated[str | None, typer.Option(
        "--prometheus", metavar="FILE", help="Also write the figures in node_exporter's textfile format "
                                             "(*.prom; replaced atomically).", show_default=False)] = None,
    html: Annotated[str | None, typer.Option(
        "--html", metavar="FILE", help="Also write a self-contained HTML page with the charts.",
        show_default=False)] = None,
    json_output: JsonOpt = False,
) -> Result | MultiResult:
    """Which tables need maintenance: snapshots, metadata files, manifests, file sizes, delete files.

    Each figure is judged by a threshold (config [health], table properties icectl.health.<key>)
    and a crossed one names the command to run. Exit code 0 when every check passes, 7 when one
    is crossed (with --all: the worst table's).
    """
    config, _io = load_config_and_io()  # the run's config (its [health] thresholds)
    thresholds = check_config(config.health, config.source)
    outputs = Outputs(prometheus, html)

    if tables.all_tables:
        def run_all() -> Iterator[Result]:
            docs = []
            for r in tables.each("health", lambda t: table_health(t, config_thresholds=thresholds, orphans=orphans)):
                docs.append(r.to_json())
                yield r
            outputs.write(docs)  # after the last table: the files hold the whole run or nothing new
        return MultiResult("health", run_all(), item=HealthResult)
    result = table_health(tables.one(), name=tables.address, config_thresholds=thresholds, orphans=orphans)
    outputs.write([result.to_json()])
    return result


def register(app: typer.Typer) -> None:
    command(app, "health", view="document", each_table=True)(health_cmd)


class Outputs:
    """The files --prometheus and --html ask for, each replaced atomically (temp file, then rename)."""

    def __init__(self, prometheus: str | None, html: str | None) -> None:
        self.prometheus = _output_path(prometheus, "--prometheus")
        self.html = _output_path(html, "--html")

    def write(self, docs: list[dict[str, Any]]) -> None:
        texts = []  # every text is made before any file is written
        if self.prometheus:
            texts.append((self.prometheus, prometheus_text(docs)))
        if self.html:
            texts.append((self.html, health_html([d for d in docs if "error" not in d])))
        io = FileIO()
        for path, text in texts:
            io.write_atomic(path, text.encode())


def _output_path(path: str | None, option: str) -> str | None:
    """``path`` made absolute, checked before any table is read: its folder must exist (a mistyped
    node_exporter folder is an error, not a new folder nobody reads)."""
    if not path:
        return None
    full = os.path.abspath(path)
    if not os.path.isdir(os.path.dirname(full)):
        raise NotFoundError(f"{option} {path}: folder {os.path.dirname(full)} does not exist",
                            hint="create it, or give a file in an existing folder")
    if os.path.isdir(full):
        raise UsageError(f"{option} {path} is a folder; give a file name")
    return full
