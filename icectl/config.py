"""Where icectl finds catalogs and storage settings.

Looked up in this order: the file named by ``$ICECTL_CONFIG``, ``./icectl.toml``,
``~/.config/icectl/config.toml``. With no file at all, icectl uses the embedded default:
one file-system catalog named ``local`` over ``./warehouse`` (``$ICECTL_WAREHOUSE`` overrides it).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icectl.errors import CorruptInputError, NotFoundError
from icectl.replay import config_places
from icectl.storage import S3Settings

DEFAULT_CATALOG = "local"
DEFAULT_WAREHOUSE = "./warehouse"
CATALOG_TYPES = ("hadoop", "sql", "rest", "glue")
DEFAULT_CACHE_MAX_BYTES = 2 * 1024**3  # "2GiB"
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
               "t": 1000**4, "tb": 1000**4, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
_NEEDS_URI = {"sql": "the SQLite file or postgresql:// URL", "rest": "the REST server's base URL"}


@dataclass
class CatalogConfig:
    name: str
    type: str = "hadoop"
    warehouse: str = DEFAULT_WAREHOUSE  # rest: sent to the server ("" when not given)
    uri: str | None = None  # sql: the SQLite file or postgresql:// URL; rest: the server
    properties: dict[str, Any] = field(default_factory=dict)  # every other key, as the catalog reads it
    source: str | None = None  # the config file it came from, for messages


@dataclass
class CacheConfig:
    """``[cache]``: where the manifest cache lives (None: the default folder) and its size bound."""

    dir: str | None = None
    max_bytes: int = DEFAULT_CACHE_MAX_BYTES


def parse_size(text: str | int) -> int:
    """Bytes from ``"2GiB"``, ``"500MB"``, ``"64k"`` or a plain number (ValueError otherwise)."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"not a size: {text!r}")
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


@dataclass
class EngineConfig:
    """``[engine]``: where the heavy part of a command runs by default (``--engine`` overrides it).

    ``default`` is ``local`` or ``spark``; ``master`` a Spark master URL or a Spark Connect URL
    (``sc://host:15002``); ``conf`` Spark settings (``[engine.conf]``, ``--spark-conf`` adds to them);
    ``executor-deletes``: executors delete files instead of the driver.
    """

    default: str = "local"
    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    executor_deletes: bool = False


@dataclass
class Config:
    catalogs: dict[str, CatalogConfig]
    default_catalog: str = DEFAULT_CATALOG
    s3: S3Settings = field(default_factory=S3Settings)
    cache: CacheConfig = field(default_factory=CacheConfig)
    source: str | None = None  # the file it came from, for messages
    # ``[health]``: `icectl health` thresholds by key (checked there: icectl.ops.health.checks)
    health: dict[str, Any] = field(default_factory=dict)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def catalog(self, name: str | None = None) -> CatalogConfig:
        name = name or self.default_catalog
        if name not in self.catalogs:
            known = ", ".join(sorted(self.catalogs)) or "none"
            raise NotFoundError(f"no catalog named '{name}' is configured (known: {known})",
                                path=self.source, hint="add it under [catalog.NAME] in the config file")
        return self.catalogs[name]


def config_path() -> Path | None:
    env = os.environ.get("ICECTL_CONFIG")
    if env:
        p = Path(env)
        if not p.is_file():
            raise NotFoundError(f"config file not found: {env}", path=env,
                                hint="fix or unset ICECTL_CONFIG")
        return p
    for p in config_places():
        if p.is_file():
            return p
    return None


def load_config(path: str | Path | None = None) -> Config:
    """Read the config file (or the embedded default) and apply environment overrides."""
    p = Path(path) if path else config_path()
    raw: dict[str, Any] = {}
    if p is not None:
        # only with a config file: most runs of a fresh install have none
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10 has no tomllib: its backport (a dependency there)
            import tomli as tomllib

        try:
            raw = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise NotFoundError(f"config file not found: {p}", path=str(p)) from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise CorruptInputError(f"invalid config file {p}: {e}", path=str(p),
                                    hint="fix the TOML syntax") from None
    return parse_config(raw, source=str(p) if p else None)


_ACTIVE: list[Config] = []  # the config of this command run (set_active_config), newest last


def set_active_config(config: Config | None) -> None:
    """Make ``config`` the one :func:`active_config` returns: the command line sets the config of
    its run (``--config FILE``), so code far from it (the neighbouring-table search of deleting
    commands) sees the same catalogs."""
    _ACTIVE[:] = [config] if config is not None else []


def active_config() -> Config:
    """The config of this run (:func:`set_active_config`), else the one :func:`load_config` finds."""
    return _ACTIVE[-1] if _ACTIVE else load_config()


def _flat_properties(body: dict[str, Any]) -> dict[str, Any]:
    """Every key but type/warehouse/uri, with sub-tables flattened: ``header = {X-Tenant = "a"}``
    is ``header.X-Tenant = "a"``, PyIceberg's spelling (TOML reads a bare dotted key as a sub-table)."""
    out: dict[str, Any] = {}

    def put(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                put(f"{prefix}.{k}", v)
        else:
            out[prefix] = value

    for key, value in body.items():
        if key not in {"type", "warehouse", "uri"}:
            put(key, value)
    return out


def parse_config(raw: dict[str, Any], source: str | None = None) -> Config:
    catalogs: dict[str, CatalogConfig] = {}
    for name, body in (raw.get("catalog") or {}).items():
        if not isinstance(body, dict):
            raise CorruptInputError(f"[catalog.{name}] must be a table", path=source)
        ctype = str(body.get("type", "hadoop"))
        if ctype not in CATALOG_TYPES:
            raise CorruptInputError(f"catalog '{name}' has unknown type '{ctype}'", path=source,
                                    hint=f"use one of: {', '.join(CATALOG_TYPES)}")
        if ctype in _NEEDS_URI and not body.get("uri"):
            raise CorruptInputError(f"{ctype} catalog '{name}' needs uri ({_NEEDS_URI[ctype]})", path=source)
        # A REST server or Glue has its own idea of the warehouse: no local default for them.
        default_wh = DEFAULT_WAREHOUSE if ctype in ("hadoop", "sql") else ""
        catalogs[name] = CatalogConfig(
            name=name, type=ctype, warehouse=str(body.get("warehouse", default_wh)),
            uri=body.get("uri"), properties=_flat_properties(body), source=source)
    default = str(raw.get("default-catalog", DEFAULT_CATALOG))
    if default not in catalogs:
        if catalogs and "default-catalog" in raw:
            raise CorruptInputError(f"default-catalog '{default}' is not configured", path=source)
        catalogs.setdefault(default, CatalogConfig(name=default))
    env_wh = os.environ.get("ICECTL_WAREHOUSE")
    if env_wh:
        catalogs[default].warehouse = env_wh
    s3raw = raw.get("s3") or {}
    s3 = S3Settings(endpoint=s3raw.get("endpoint"), region=s3raw.get("region"),
                    access_key_id=s3raw.get("access-key-id"),
                    secret_access_key=s3raw.get("secret-access-key"),
                    session_token=s3raw.get("session-token"))
    health = raw.get("health") or {}
    if not isinstance(health, dict):
        raise CorruptInputError("[health] must be a table", path=source)
    return Config(catalogs=catalogs, default_catalog=default, s3=s3, cache=_parse_cache(raw, source), source=source,
                  health=dict(health), engine=_parse_engine(raw, source))


_ENGINE_KEYS = {"default", "master", "conf", "executor-deletes"}


def _parse_engine(raw: dict[str, Any], source: str | None) -> EngineConfig:
    body = raw.get("engine") or {}
    if not isinstance(body, dict):
        raise CorruptInputError("[engine] must be a table", path=source)
    unknown = sorted(set(body) - _ENGINE_KEYS)
    if unknown:
        raise CorruptInputError(f"[engine] has unknown key '{unknown[0]}'", path=source,
                                hint=f"known keys: {', '.join(sorted(_ENGINE_KEYS))}")
    default = str(body.get("default", "local"))
    if default not in ("local", "spark"):
        raise CorruptInputError(f"[engine] default '{default}' is not local or spark", path=source)
    conf = body.get("conf") or {}
    if not isinstance(conf, dict):
        raise CorruptInputError("[engine] conf must be a table of Spark settings", path=source,
                                hint='write [engine.conf] with lines like "spark.executor.memory" = "4g"')
    flat: dict[str, str] = {}

    def put(prefix: str, value: Any) -> None:  # TOML reads spark.executor.memory = "4g" as nested tables
        if isinstance(value, dict):
            for k, v in value.items():
                put(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat[prefix] = str(value).lower() if isinstance(value, bool) else str(value)

    put("", conf)
    master = body.get("master")
    deletes = body.get("executor-deletes", False)
    if not isinstance(deletes, bool):
        raise CorruptInputError("[engine] executor-deletes must be true or false", path=source)
    return EngineConfig(default=default, master=str(master) if master else None, conf=flat,
                        executor_deletes=deletes)


def _parse_cache(raw: dict[str, Any], source: str | None) -> CacheConfig:
    body = raw.get("cache") or {}
    if not isinstance(body, dict):
        raise CorruptInputError("[cache] must be a table", path=source)
    max_size = body.get("max-size", DEFAULT_CACHE_MAX_BYTES)
    try:
        max_bytes = parse_size(max_size)
    except ValueError:
        raise CorruptInputError(f"[cache] max-size {max_size!r} is not a size", path=source,
                                hint='write it like "2GiB", "500MB" or a number of bytes') from None
    folder = body.get("dir")
    return CacheConfig(dir=os.path.expanduser(str(folder)) if folder else None, max_bytes=max_bytes)
