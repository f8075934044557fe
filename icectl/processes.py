"""The one pool of worker processes, for Python work that holds the GIL: fastavro decoding when
the native decoder is off (:mod:`icectl.table.manifest_read`) and encoding compaction's new
manifests (:func:`icectl.ops.compact.run.write_bins`). Threads cannot spread such work over cores.

Never forked from this process (it may have threads: I/O, s3fs's event loop): a forkserver forks
workers from a clean process (no preloads: they would make it import the main module); a worker
imports what unpickling a task needs and, as every multiprocessing child does, a main script
(guarded; ``python -m icectl`` is skipped). ``ICECTL_DECODE_PROCESSES`` sets how many workers, 0
or 1 for none (the name is from when decoding was the only use).
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

POOL_ENV = "ICECTL_DECODE_PROCESSES"  # "0": never; a number: that many worker processes

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool_size() -> int:
    """Worker processes the pool has (or would have): the setting, else one per core up to 8."""
    raw = os.environ.get(POOL_ENV, "")
    if raw.strip().isdigit():
        return int(raw)
    return min(os.cpu_count() or 1, 8)


def worker_pool() -> ProcessPoolExecutor | None:
    """The shared pool, started on first use; None when it would have fewer than 2 workers."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _pool
    with _pool_lock:
        if _pool is None:
            size = pool_size()
            if size < 2:
                return None
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            _pool = ProcessPoolExecutor(max_workers=size, mp_context=ctx)
            atexit.register(shutdown)
        return _pool


def discard_pool() -> None:
    """Forget a broken pool (a worker died): the next :func:`worker_pool` starts a new one."""
    shutdown()


def shutdown() -> None:
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["POOL_ENV", "discard_pool", "pool_size", "shutdown", "worker_pool"]
