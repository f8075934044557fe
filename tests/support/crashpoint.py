"""Kill an icectl process at one of its file operations: before it, after it, or torn in the middle.

:class:`Runner` runs ``icectl ARGS`` in a child process (forked from a warm server process) with
every change :class:`icectl.storage.FileIO` makes to storage counted, in the order the process makes
them (threads included):

- ``write``   (a whole file from bytes: metadata files, manifests, manifest lists, temp files),
- ``create``  (a file written as a stream: data files),
- ``rename``  (``rename_no_replace``: link the temp file under its final name, then unlink it),
- ``replace`` (``os.replace`` in ``write_atomic``: the version hint put in place),
- ``delete``  and ``makedirs``.

Before operation number ``POINT`` (counted from 0) is attempted the process logs it to ``LOG`` (one
JSON line ``{"i", "op", "path"}``, ``path`` being the name the file ends up under), and then
SIGKILLs itself (no ``finally``, no cleanup, as a killed process or a lost machine leaves it):

- ``before``: without doing it,
- ``after``:  right after it is done,
- ``torn``:   half done: a ``write`` or ``create`` leaves the first half of the file's bytes under its
  name, a ``rename`` leaves the new name linked and the temp name not yet removed. (A ``replace``,
  ``delete`` or ``makedirs`` is one system call: it has no torn state, ``torn`` is ``after`` there.)

``POINT`` -1 kills nowhere: the run logs every operation (how many points there are, and which).
The exit status is the CLI's, or -9 (SIGKILL) when killed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

OPS = ("write", "create", "rename", "replace", "delete", "makedirs")
MODES = ("before", "after", "torn")
_HERE = Path(__file__).resolve().parent


class Runner:
    """Runs the killed processes: a warm parent (icectl, pyarrow and the commands imported once)
    forks one child per run, so a run costs a fork, not an interpreter start. Use as a context manager."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        import subprocess

        repo = _HERE.parent.parent
        path = os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": path, **(env or {})})

    def run(self, log: Path, point: int, mode: str, args: list[str]) -> int:
        """Run ``icectl ARGS`` killed at ``point`` (``mode``): its exit status, -9 when killed; its
        stderr is ``LOG.err``. Any other end than 0 or a kill fails."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([str(log), point, mode, args]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the crashpoint server died (exit {self.proc.wait()})")
        code = int(line)
        if code not in (0, -signal.SIGKILL):
            err = Path(f"{log}.err")
            raise AssertionError(f"icectl {' '.join(args)} exited {code}: "
                                 f"{err.read_text()[-2000:] if err.exists() else ''}")
        return code

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def logged(log: Path) -> list[dict[str, Any]]:
    """The operations a run logged, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _install(log: Path, point: int, mode: str) -> None:
    from icectl.storage import FileIO, local_path
    from icectl.storage import fileio as fileio_module

    lock = threading.Lock()
    counter = [0]
    fd = os.open(str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def note(op: str, path: str) -> int:
        with lock:
            i = counter[0]
            counter[0] += 1
            os.write(fd, (json.dumps({"i": i, "op": op, "path": path}) + "\n").encode())
        return i

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def hit(i: int, m: str) -> bool:
        return i == point and mode == m

    orig_write, orig_create = FileIO.write, FileIO.create
    orig_rename, orig_delete, orig_makedirs = FileIO.rename_no_replace, FileIO.delete, FileIO.makedirs
    orig_replace, orig_write_atomic = os.replace, FileIO.write_atomic
    in_write_atomic = threading.local()  # os.replace counts there only (not in icectl's manifest cache)

    def write(self: Any, path: str, data: bytes) -> None:
        i = note("write", path)
        if hit(i, "before"):
            die()
        if hit(i, "torn"):
            orig_write(self, path, data[:len(data) // 2])
            die()
        orig_write(self, path, data)
        if hit(i, "after"):
            die()

    @contextmanager
    def create(self: Any, path: str) -> Iterator[IO[bytes]]:
        i = note("create", path)
        if hit(i, "before"):
            die()
        with orig_create(self, path) as f:
            yield f
            if hit(i, "torn"):
                f.flush()
                local = local_path(path)
                os.truncate(local, os.path.getsize(local) // 2)
                die()
        if hit(i, "after"):
            die()

    def rename_no_replace(self: Any, src: str, dst: str) -> bool:
        i = note("rename", dst)
        if hit(i, "before"):
            die()
        if hit(i, "torn"):
            try:
                os.link(local_path(src), local_path(dst))
            finally:
                die()
        done = orig_rename(self, src, dst)
        if hit(i, "after"):
            die()
        return bool(done)

    def write_atomic(self: Any, path: str, data: bytes, temp_name: str | None = None) -> None:
        in_write_atomic.on = True
        try:
            orig_write_atomic(self, path, data, temp_name)
        finally:
            in_write_atomic.on = False

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        if not getattr(in_write_atomic, "on", False):
            orig_replace(src, dst, **kwargs)
            return
        i = note("replace", os.fspath(dst))
        if hit(i, "before"):
            die()
        orig_replace(src, dst, **kwargs)
        if hit(i, "after") or hit(i, "torn"):
            die()

    def delete(self: Any, path: str) -> bool:
        i = note("delete", path)
        if hit(i, "before"):
            die()
        gone = orig_delete(self, path)
        if hit(i, "after") or hit(i, "torn"):
            die()
        return bool(gone)

    def makedirs(self: Any, path: str) -> None:
        i = note("makedirs", path)
        if hit(i, "before"):
            die()
        orig_makedirs(self, path)
        if hit(i, "after") or hit(i, "torn"):
            die()

    FileIO.write = write  # type: ignore[method-assign]
    FileIO.create = create  # type: ignore[assignment,method-assign]
    FileIO.rename_no_replace = rename_no_replace  # type: ignore[method-assign]
    FileIO.delete = delete  # type: ignore[method-assign]
    FileIO.makedirs = makedirs  # type: ignore[method-assign]
    FileIO.write_atomic = write_atomic  # type: ignore[method-assign]
    fileio_module.os.replace = replace  # type: ignore[assignment]  # write_atomic's rename (os is shared)


def _child(log: Path, point: int, mode: str, args: list[str]) -> None:
    """In the forked child: the hooks, then the CLI; never returns."""
    code = 1
    try:
        for fd, suffix in ((1, ".out"), (2, ".err")):
            out = os.open(f"{log}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        _install(log, point, mode)
        from icectl.cli.app import main

        sys.argv = ["icectl", *args]
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve() -> None:
    import pyarrow.parquet  # noqa: F401

    import icectl.cli.app
    import icectl.ops.orphans
    import icectl.ops.rewrite_data_files  # noqa: F401

    for line in sys.stdin:
        log, point, mode, args = json.loads(line)
        if mode not in MODES:
            raise SystemExit(f"mode must be one of {MODES}")
        pid = os.fork()
        if pid == 0:
            _child(Path(log), int(point), mode, list(args))
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        sys.stdout.write(f"{code}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
