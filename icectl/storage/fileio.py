"""The :class:`FileIO`: reads and writes files through fsspec, every failure one of icectl's errors."""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import IO, Any

from icectl import replay
from icectl.errors import AccessDeniedError, IcectlError, NotFoundError, StorageError
from icectl.storage.identity import FileIdentity, local_identity, object_identity
from icectl.storage.listing import ListedFile, walk_files
from icectl.storage.local import LOCAL_FILES, native
from icectl.storage.paths import S3_SCHEMES, basename, join, local_path, parent, scheme_of
from icectl.threads import LIST_WORKERS

# Base classes (by name: importing botocore or aiohttp costs start-up) of the errors object storage
# raises when it is unreachable or refuses: botocore's transport and service errors, aiohttp's.
_STORAGE_ERROR_BASES = frozenset({"BotoCoreError", "ClientError", "NoCredentialsError", "ServerDisconnectedError"})


@dataclass
class S3Settings:
    """Object-storage settings; unset values fall back to the usual AWS variables."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    path_style: bool | None = None  # None: the SDK's default addressing

    def with_properties(self, props: Mapping[str, Any]) -> S3Settings:
        """These settings overridden by Iceberg FileIO properties (a REST catalog's vended table config:
        ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``, ``s3.endpoint``,
        ``s3.region``, ``s3.path-style-access``, as PyIceberg and Java name them). Vended keys
        replace the configured ones together, so a vended key never pairs with a configured secret."""
        changes: dict[str, Any] = {}
        for key, attr in (("s3.endpoint", "endpoint"), ("s3.region", "region"), ("client.region", "region")):
            if props.get(key) and attr not in changes:
                changes[attr] = str(props[key])
        if props.get("s3.access-key-id") and props.get("s3.secret-access-key"):
            changes.update(access_key_id=str(props["s3.access-key-id"]),
                           secret_access_key=str(props["s3.secret-access-key"]),
                           session_token=str(props["s3.session-token"]) if props.get("s3.session-token")
                           else None)
        style = props.get("s3.path-style-access")
        if style is not None:
            changes["path_style"] = str(style).strip().lower() == "true"
        return replace(self, **changes) if changes else self

    def fsspec_options(self) -> dict[str, Any]:
        endpoint = self.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        opts: dict[str, Any] = {}
        client: dict[str, Any] = {}
        if endpoint:
            client["endpoint_url"] = endpoint
        if self.region:
            client["region_name"] = self.region
        if client:
            opts["client_kwargs"] = client
        if self.access_key_id:
            opts["key"] = self.access_key_id
        if self.secret_access_key:
            opts["secret"] = self.secret_access_key
        if self.session_token:
            opts["token"] = self.session_token
        # Fail fast on an unreachable endpoint instead of retrying for minutes.
        opts["config_kwargs"] = {"connect_timeout": 5, "read_timeout": 30,
                                 "retries": {"max_attempts": 2, "mode": "standard"}}
        if self.path_style is not None:
            opts["config_kwargs"]["s3"] = {"addressing_style": "path" if self.path_style else "virtual"}
        # fsspec shares one instance per option set process-wide and s3fs caches listings in it:
        # a later load in the same process would list metadata/ from that cache and miss a
        # vN.metadata.json another writer committed since. (The instance itself stays shared:
        # a fresh one costs 0.1-0.3 s of botocore setup per FileIO.)
        opts["use_listings_cache"] = False
        return opts


def _noted(path: str) -> None:
    # What a recorded rows view depended on (icectl.replay): local paths are checked again before
    # a replay; a remote one makes the run unreplayable.
    if replay.armed():
        replay.note(native(local_path(path)) if scheme_of(path) == "file" else None)


@dataclass
class FileIO:
    """Reads and writes files by path or URL (local, ``file:``, ``s3://``/``s3a://``)."""

    s3: S3Settings = field(default_factory=S3Settings)
    _filesystems: dict[str, Any] = field(default_factory=dict, repr=False)
    _conditional_create: dict[str, bool] = field(default_factory=dict, repr=False)  # per bucket
    # Called with the path before every write, delete, rename or mkdir: raises to refuse it
    # (icectl.table.HomeGate: no byte through a copied table's FileIO). Picklable, so it travels.
    write_gate: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        # Sent to Spark executors (icectl.engine): the settings travel, the open clients do not.
        return {"s3": self.s3, "_filesystems": {}, "_conditional_create": {}, "write_gate": self.write_gate}

    def gated(self, gate: Callable[[str], None] | None) -> FileIO:
        """This FileIO (sharing its open clients) with ``gate`` checking every change it makes."""
        # Every attribute shared as it is (the open clients, a subclass's own state): neither replace()
        # (a subclass's __init__ may take other arguments) nor copy() (__getstate__ drops the clients).
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.write_gate = gate
        return view

    def _check_write(self, path: str) -> None:
        replay.spoil()  # a run that writes is not replayed
        if self.write_gate is not None:
            self.write_gate(path)

    def filesystem(self, path: str) -> tuple[Any, str]:
        """The fsspec filesystem for ``path`` and the path as that filesystem names it."""
        scheme = scheme_of(path)
        if scheme == "file":
            fs = self._get("file", {})
            return fs, local_path(path)
        if scheme in S3_SCHEMES:
            fs = self._get("s3", self.s3.fsspec_options())
            return fs, path.split("://", 1)[1]
        return self._get(scheme, {}), path

    def _fs(self, path: str) -> tuple[Any, str]:
        """As :meth:`filesystem`, but local paths go straight to ``os`` (no fsspec import)."""
        if scheme_of(path) == "file":
            return LOCAL_FILES, native(local_path(path))
        return self.filesystem(path)

    def _get(self, protocol: str, options: dict[str, Any]) -> Any:
        if protocol not in self._filesystems:
            import fsspec  # imported lazily: s3fs pulls in aiobotocore, slow to import

            try:
                self._filesystems[protocol] = fsspec.filesystem(protocol, **options)
            except (ImportError, ValueError, OSError) as e:
                # Not the library's own text: pyarrow's hdfs:// alone lists ~15 KB of dlopen attempts.
                raise StorageError(f"no storage support for {protocol}:// paths "
                                   f"({type(e).__name__} loading its client)",
                                   hint="icectl reads local paths and s3:// (s3a://, s3n://)") from e
        return self._filesystems[protocol]

    @contextmanager
    def _errors(self, path: str, action: str) -> Iterator[None]:
        try:
            yield
        except IcectlError:
            raise
        except FileNotFoundError:
            raise NotFoundError(f"file not found: {path}", path=path) from None
        except IsADirectoryError:
            raise NotFoundError(f"expected a file but found a directory: {path}", path=path) from None
        except PermissionError as e:
            raise AccessDeniedError(f"permission denied {action} {path}: {e}", path=path) from e
        except OSError as e:
            raise StorageError(f"storage error {action} {path}: {e}", path=path) from e
        except Exception as e:  # botocore/aiohttp errors have no common base we can import cheaply
            # By their bases, not a list of leaves: botocore's BotoCoreError covers every transport
            # failure (a connection closed before an answer, timeouts, refused, credentials), its
            # ClientError every error the service answered; aiohttp's ClientError its own.
            name = type(e).__name__
            if _STORAGE_ERROR_BASES & {c.__name__ for c in type(e).__mro__}:
                raise StorageError(f"storage unreachable {action} {path}: {name}: {e}",
                                   path=path) from e
            raise

    def read(self, path: str) -> bytes:
        _noted(path)
        fs, p = self._fs(path)
        with self._errors(path, "reading"):
            return fs.cat_file(p)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        _noted(path)
        fs, p = self._fs(path)
        with self._errors(path, "reading"):
            return fs.cat_file(p, start=offset, end=offset + length)

    @contextmanager
    def open(self, path: str) -> Iterator[IO[bytes]]:
        _noted(path)
        fs, p = self._fs(path)
        with self._errors(path, "opening"), fs.open(p, "rb") as f:
            yield f

    def exists(self, path: str) -> bool:
        _noted(path)
        fs, p = self._fs(path)
        with self._errors(path, "checking"):
            return bool(fs.exists(p))

    def is_dir(self, path: str) -> bool:
        _noted(path)
        fs, p = self._fs(path)
        with self._errors(path, "checking"):
            return bool(fs.isdir(p))

    def size(self, path: str) -> int:
        _noted(path)
        fs, p = self._fs(path)
        with self._errors(path, "checking"):
            return int(fs.size(p))

    def identity(self, path: str) -> FileIdentity | None:
        """The store's identity of the file's current version (None: the store gives none, so
        nothing read from it is ever cached). Local: a stat; object storage: a HEAD."""
        _noted(path)
        scheme = scheme_of(path)
        if scheme == "file":
            with self._errors(path, "checking"):
                st = os.stat(native(local_path(path)))
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(path)
            return local_identity(st)
        if scheme not in S3_SCHEMES:
            return None
        fs, p = self._fs(path)
        with self._errors(path, "checking"):
            return object_identity(fs.info(p, refresh=True))

    def read_with_identity(self, path: str) -> tuple[bytes, FileIdentity | None]:
        """The file's bytes and the identity of exactly the version read (None when the file
        changed while it was read, or the store gives no identity: do not cache those bytes)."""
        _noted(path)
        scheme = scheme_of(path)
        if scheme == "file":
            with self._errors(path, "reading"), open(native(local_path(path)), "rb") as f:
                before = local_identity(os.fstat(f.fileno()))
                data = f.read()
                after = local_identity(os.fstat(f.fileno()))  # its racy flag is taken after the read
            return data, after if after == before else None
        if scheme not in S3_SCHEMES:
            return self.read(path), None
        fs, p = self._fs(path)
        with self._errors(path, "reading"):
            try:
                # s3fs heads the object on open and reads it with If-Match on that ETag: the bytes
                # are of the version the details name, or FileExpired (replaced meanwhile).
                with fs.open(p, "rb") as f:
                    identity = object_identity(f.details)
                    data = f.read()
            except OSError as e:
                if type(e).__name__ != "FileExpired":
                    raise
                return self.read(path), None
        return data, identity

    def list_names(self, directory: str) -> list[str]:
        """Base names of the entries directly inside ``directory`` ([] when it does not exist)."""
        _noted(directory)
        fs, p = self._fs(directory)
        with self._errors(directory, "listing"):
            try:
                entries = fs.ls(p, detail=False)
            except FileNotFoundError:
                return []
        return [basename(str(e)) for e in entries]

    def walk_files(self, location: str, accept: Callable[[str], bool], *,
                   workers: int = LIST_WORKERS) -> Iterator[ListedFile]:
        """Every file under the folder ``location`` with its modification time: :func:`walk_files`."""
        replay.spoil()  # a walk reads folders no single stat vouches for
        return walk_files(self, location, accept, workers=workers)

    def write(self, path: str, data: bytes) -> None:
        self._check_write(path)
        fs, p = self._fs(path)
        with self._errors(path, "writing"):
            if scheme_of(path) == "file":
                os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
            fs.pipe_file(p, data)

    @contextmanager
    def create(self, path: str) -> Iterator[IO[bytes]]:
        """A new file to write as a stream (a data file larger than memory should hold), checked by
        the write gate like :meth:`write`. Not atomic: a reader must not know the path before it is
        closed (data files are referenced only by a later commit)."""
        self._check_write(path)
        fs, p = self._fs(path)
        with self._errors(path, "writing"):
            if scheme_of(path) == "file":
                os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
            with fs.open(p, "wb") as f:
                yield f

    def makedirs(self, path: str) -> None:
        """Create a directory (object stores have none: nothing to do there)."""
        self._check_write(path)
        fs, p = self._fs(path)
        if scheme_of(path) != "file":
            return
        with self._errors(path, "creating"):
            fs.makedirs(p, exist_ok=True)

    def delete(self, path: str) -> bool:
        """Delete a file; False when it was already gone (not an error for cleanup)."""
        self._check_write(path)
        fs, p = self._fs(path)
        with self._errors(path, "deleting"):
            try:
                fs.rm_file(p)
            except FileNotFoundError:
                return False
        return True

    # -- commit primitives (used by icectl.catalog.operations) ------------------------------

    def invalidate(self, path: str) -> None:
        """Forget cached listings under ``path``: another process may have added files since."""
        fs, p = self._fs(path)
        invalidate = getattr(fs, "invalidate_cache", None)
        if invalidate is not None:
            invalidate(p)

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Give the local file ``src`` the name ``dst`` unless ``dst`` exists: True if done.

        ``link(2)`` fails with EEXIST where ``rename(2)`` would silently replace ``dst``, so of
        two writers racing for one name exactly one wins. On False ``src`` is left in place.
        """
        self._check_write(dst)
        if scheme_of(src) != "file" or scheme_of(dst) != "file":
            raise StorageError(f"no-replace rename needs local files, not {src} -> {dst}", path=dst)
        s, d = local_path(src), local_path(dst)
        with self._errors(dst, "committing"):
            fsync_path(s)  # the content is on disk before any reader can find it under dst
            try:
                os.link(s, d)
            except FileExistsError:
                return False
            fsync_path(os.path.dirname(d) or ".", directory=True)  # and so is the new name
        try:
            os.unlink(s)  # the content now lives under dst; the temp name is only a leftover
        except OSError:
            pass
        return True

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` unless something is already there: True if created.

        Never replaces an existing file. Local: a temp file hard-linked into place (readers
        never see a partial file). Object storage: a conditional PUT (``If-None-Match: *``);
        check :meth:`supports_conditional_create` first, a server may ignore the header.
        """
        self._check_write(path)
        if scheme_of(path) == "file":
            tmp = f"{parent(path)}/.{uuid.uuid4()}.tmp"
            self.write(tmp, data)
            try:
                created = self.rename_no_replace(tmp, path)
            finally:
                if os.path.exists(local_path(tmp)):
                    self.delete(tmp)
            return created
        fs, p = self._fs(path)
        with self._errors(path, "creating"):
            try:
                fs.pipe_file(p, data, mode="create")
            except FileExistsError:
                return False
            except OSError as e:
                if _is_precondition_failure(e):
                    return False
                raise
        return True

    def supports_conditional_create(self, directory: str) -> bool:
        """Whether :meth:`write_if_absent` is safe under ``directory`` (cached per bucket).

        Local files: always. Object storage: probed once by creating a scratch object twice;
        the second create must be refused (servers without conditional writes ignore it).
        """
        if scheme_of(directory) == "file":
            return True
        bucket = self.filesystem(directory)[1].split("/", 1)[0]
        if bucket not in self._conditional_create:
            probe = join(directory, f".icectl-conditional-write-probe-{uuid.uuid4()}")
            try:
                supported = self.write_if_absent(probe, b"1") and not self.write_if_absent(probe, b"2")
            except StorageError:
                supported = False  # e.g. 501 NotImplemented for the header
            except NotFoundError:  # a PUT is "not found" only when the bucket is missing
                raise NotFoundError(f"bucket '{bucket}' not found (writing under {directory})", path=directory,
                                    hint="create the bucket, or check the table location and the S3 endpoint"
                                    ) from None
            finally:
                try:
                    self.delete(probe)
                except IcectlError:
                    pass
            self._conditional_create[bucket] = supported
        return self._conditional_create[bucket]

    def write_atomic(self, path: str, data: bytes, temp_name: str | None = None) -> None:
        """Replace ``path`` so that readers see the old or the new content, never a part.

        Local: write ``temp_name`` (default a hidden unique name) beside it, then ``os.replace``.
        Object storage: one PUT already is atomic.
        """
        self._check_write(path)
        if scheme_of(path) != "file":
            self.write(path, data)
            return
        tmp = join(parent(path), temp_name or f".{uuid.uuid4()}.tmp")
        self.write(tmp, data)
        with self._errors(path, "replacing"):
            try:
                fsync_path(local_path(tmp))  # a crash never leaves an empty file under the name
                os.replace(local_path(tmp), local_path(path))
            except OSError:
                self.delete(tmp)
                raise
            fsync_path(os.path.dirname(local_path(path)) or ".", directory=True)



def fsync_path(path: str, *, directory: bool = False) -> None:
    """Flush a local file's content (or a folder's entries) to the disk.

    A file system may not sync folders (EINVAL): nothing more can be done there.
    """
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if not directory or e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _is_precondition_failure(e: BaseException) -> bool:
    """A refused conditional write: 412 PreconditionFailed, or 409 while a racing one is in flight."""
    cause = e.__cause__ or e
    response = getattr(cause, "response", None)
    code = (response or {}).get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}


def delete_quietly(io: FileIO, path: str) -> None:
    """Best-effort removal of a file no committed snapshot references: a leftover is garbage,
    never data loss, so a failure is not an error."""
    try:
        io.delete(path)
    except IcectlError:
        pass
