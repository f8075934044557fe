"""``--engine``, ``--spark-master``, ``--spark-conf`` (and ``--executor-deletes`` where files are deleted):
declared once, added by :func:`icectl.cli.framework.command` (``engine=True`` or ``"deletes"``) to
expire-snapshots, remove-orphan-files, compact, inspect files|entries|partitions and validate.
``--engine`` is the parameter ``engine_name``: ``engine`` is the opened engine the framework passes
to the command function."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from icectl.config import EngineConfig
from icectl.engine import EngineSettings, parse_spark_conf
from icectl.errors import UsageError

EngineOpt = Annotated[str | None, typer.Option(
    "--engine", metavar="local|spark", show_default=False,
    help="Where the heavy part runs: local (this machine) or spark (decode and write manifests as Spark "
         "tasks; the commit and every safety check stay here). Default: [engine] default in the config, "
         "else local.")]
SparkMasterOpt = Annotated[str | None, typer.Option(
    "--spark-master", metavar="URL", show_default=False,
    help="Spark master (local[4], spark://host:7077, yarn, k8s://...) or Spark Connect URL (sc://host:15002) "
         "for --engine spark. Default: [engine] master, else the running session, else local[*].")]
SparkConfOpt = Annotated[list[str] | None, typer.Option(
    "--spark-conf", metavar="KEY=VALUE", show_default=False,
    help="A Spark setting for --engine spark (repeatable), after [engine.conf] in the config.")]
ExecutorDeletesOpt = Annotated[bool, typer.Option(
    "--executor-deletes", help="With --engine spark, executors delete the files (default: the driver "
                               "deletes them, a bounded number at a time, after every check).")]

ENGINE_PARAMS: dict[str, tuple[Any, Any]] = {
    "engine_name": (EngineOpt, None), "spark_master": (SparkMasterOpt, None), "spark_conf": (SparkConfOpt, None)}
DELETE_ENGINE_PARAMS: dict[str, tuple[Any, Any]] = {**ENGINE_PARAMS,
                                                    "executor_deletes": (ExecutorDeletesOpt, False)}


def settings_from(given: dict[str, Any], config: EngineConfig) -> EngineSettings:
    """The :class:`icectl.engine.EngineSettings` of the options given, over the config's ``[engine]``."""
    name = given.get("engine_name") or config.default
    master = given.get("spark_master") or config.master
    conf = (*config.conf.items(), *parse_spark_conf(given.get("spark_conf") or ()))
    settings = EngineSettings(name=name, master=master, conf=tuple(dict(conf).items()),
                              executor_deletes=bool(given.get("executor_deletes")) or config.executor_deletes)
    settings.check()
    if name == "local":
        for option, key in (("--spark-master", "spark_master"), ("--spark-conf", "spark_conf"),
                            ("--executor-deletes", "executor_deletes")):
            if given.get(key):
                raise UsageError(f"{option} needs --engine spark (the engine of this run is local)")
    return settings
