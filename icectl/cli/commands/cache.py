"""Commands: cache (info, clear) for the manifest cache (icectl/table/manifest_cache.py)."""

from __future__ import annotations

import typer

from icectl.cli.framework import command, state
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.config import load_config
from icectl.ops.cache import CacheClearResult, CacheInfoResult
from icectl.table import manifest_cache


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # not reached


def _configure() -> None:
    """Honour ``--config``: its [cache] section names the folder and the bound."""
    manifest_cache.configure_cache(load_config(state.config_path).cache)


def cache_info(json_output: JsonOpt = False) -> CacheInfoResult:
    """Show the cache folder, its entries and size, the size bound, and whether it is writable."""
    _configure()
    info = manifest_cache.cache_info()
    state_words = ("on" if info.enabled else "off") + ("" if info.writable else ", read-only")
    return CacheInfoResult(
        title=f"manifest cache ({state_words}): {info.entries} entries, {human_size(info.bytes)} of "
              f"{human_size(info.bound)} in {info.dir}",
        dir=info.dir, enabled=info.enabled, writable=info.writable, entries=info.entries, bytes=info.bytes,
        max_bytes=info.bound)


def cache_clear(dry_run: DryRunOpt = False, json_output: JsonOpt = False) -> CacheClearResult:
    """Remove every entry of the cache (safe while other icectl processes run: they decode again)."""
    _configure()
    entries, size = manifest_cache.clear_cache(dry_run=dry_run)
    folder = str(manifest_cache.cache_dir())
    return CacheClearResult(
        title=f"{'would remove' if dry_run else 'removed'} {entries} entries ({human_size(size)}) from {folder}",
        dir=folder, dry_run=dry_run, entries=entries, bytes=size)


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
    cache_app = typer.Typer(
        help="The manifest cache: decoded manifests and manifest lists kept on the local disk between runs "
             "(folder: $ICECTL_CACHE_DIR, [cache] dir, or ~/.cache/icectl; off: ICECTL_CACHE=off or --no-cache).",
        no_args_is_help=True, rich_markup_mode=None)
    command(cache_app, "info")(cache_info)
    command(cache_app, "clear")(cache_clear)
    app.add_typer(cache_app, name="cache")
