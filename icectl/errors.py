"""icectl's errors. Each carries the exit code the CLI maps it to (one table for all commands).

| code | meaning                                                      |
|------|--------------------------------------------------------------|
| 0    | success                                                      |
| 1    | unexpected internal error (a bug; rerun with --debug)        |
| 2    | usage error (bad option, bad argument)                       |
| 3    | not found (table, file, snapshot, ref, catalog)              |
| 4    | corrupt or unsupported input (metadata, Avro, Puffin, version)|
| 5    | commit conflict after retries, or commit state unknown       |
| 6    | refused for safety                                           |
| 7    | validation findings at error severity                        |
| 8    | storage unreachable (I/O, network, credentials)              |
| 130  | interrupted (Ctrl-C); a delete run says how far it got       |
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    INTERNAL = 1
    USAGE = 2
    NOT_FOUND = 3
    CORRUPT = 4
    CONFLICT = 5
    REFUSED = 6
    FINDINGS = 7
    STORAGE = 8
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


# (code, short name, what it means): the one table behind --help, the man pages and the README.
EXIT_CODE_TABLE: list[tuple[int, str, str]] = [
    (ExitCode.OK, "success", "the command did what was asked"),
    (ExitCode.INTERNAL, "internal error", "a bug in icectl: rerun with --debug and report the traceback"),
    (ExitCode.USAGE, "usage error", "a bad option or argument"),
    (ExitCode.NOT_FOUND, "not found", "table, metadata file, manifest, snapshot, ref or catalog is missing"),
    (ExitCode.CORRUPT, "corrupt or unsupported input",
     "metadata JSON, Avro, Puffin or format version icectl cannot read"),
    (ExitCode.CONFLICT, "commit conflict",
     "another writer committed first and retries ran out, or the commit's outcome is unknown"),
    (ExitCode.REFUSED, "refused for safety",
     "for example gc.enabled=false, or a file outside the table location"),
    (ExitCode.FINDINGS, "validation findings", "validate found problems at error severity"),
    (ExitCode.STORAGE, "storage unreachable", "I/O, network or credential failure"),
    (ExitCode.INTERRUPTED, "interrupted",
     "Ctrl-C; a delete run says how many of its files it deleted and how to finish"),
]


class IcectlError(Exception):
    """Base of every error icectl raises on purpose."""

    exit_code = ExitCode.INTERNAL

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.hint = hint

    def in_file(self, path: str) -> IcectlError:
        """This error, naming ``path`` (for errors raised by code that only saw the file's bytes)."""
        if path not in self.message:
            self.message = f"{self.message} in {path}"
        self.path = self.path or path
        return self

    def one_line(self) -> str:
        """What went wrong, in which file, and what to do: the single stderr line."""
        parts = [self.message]
        if self.path and self.path not in self.message:
            parts.append(f"(file: {self.path})")
        text = " ".join(parts)
        if self.hint:
            text += f"; {self.hint}"
        return " ".join(text.split())  # exactly one line


class UsageError(IcectlError):
    exit_code = ExitCode.USAGE


class NotFoundError(IcectlError):
    exit_code = ExitCode.NOT_FOUND


class CorruptInputError(IcectlError):
    exit_code = ExitCode.CORRUPT


class UnsupportedError(CorruptInputError):
    """Input that is well-formed but beyond what icectl supports (a newer format version)."""


class CommitConflictError(IcectlError):
    exit_code = ExitCode.CONFLICT


class RefusedError(IcectlError):
    exit_code = ExitCode.REFUSED


class FindingsError(IcectlError):
    exit_code = ExitCode.FINDINGS


class StorageError(IcectlError):
    exit_code = ExitCode.STORAGE


class AccessDeniedError(StorageError):
    """The storage answered, and refused this credential (a folder a vended credential may not list)."""
