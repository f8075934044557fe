"""An AWS Glue Data Catalog, as Iceberg Java's GlueCatalog and PyIceberg's glue.py use it.

* Namespaces are Glue databases (one level); tables are Glue tables whose ``table_type`` parameter is
  ``ICEBERG`` (any case), with the current metadata file in ``metadata_location``.
* A commit (:class:`GlueOperations`, a pointer swap) writes ``<NNNNN>-<uuid>.metadata.json``, reads the
  Glue table afresh, checks that it still points at the base this attempt started from (Java's
  ``checkMetadataLocation``), and sends ``UpdateTable`` conditioned on that read's ``VersionId``
  (Glue refuses it with ``ConcurrentModificationException`` when the table changed in between) with
  ``metadata_location`` = new, ``previous_metadata_location`` = base and the other parameters kept.
* The default table location is the database's ``LocationUri`` + ``/<table>``, else
  ``<warehouse>/<db>.db/<table>`` (Java's ``defaultWarehouseLocation``, PyIceberg's Hive style).

boto3 is imported when a Glue catalog is first used: it is the ``glue`` extra.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from icectl.catalog.operations import MetastoreOperations
from icectl.config import CatalogConfig
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, RefusedError, StorageError, UsageError
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import DecimalType, FixedType, IcebergType, ListType, MapType, NestedField, StructType
from icectl.storage import FileIO

TABLE_TYPE = "table_type"
ICEBERG = "ICEBERG"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
# Known keys of [catalog.NAME] for type = "glue" (besides type and warehouse); PyIceberg's spelling
# with the "glue." prefix is accepted too.
KEYS = ("region", "endpoint", "profile", "id", "skip-archive", "access-key-id", "secret-access-key",
        "session-token")
INSTALL_HINT = "pip install 'icectl[glue]'"
_BOTO_KEYS = {"access-key-id": "aws_access_key_id", "secret-access-key": "aws_secret_access_key",
              "session-token": "aws_session_token"}
# Errors that say the credentials or permissions are wrong: no retry helps (exit 8).
_ACCESS_ERRORS = {"AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
                  "ExpiredTokenException", "InvalidClientTokenId", "SignatureDoesNotMatch",
                  "UnauthorizedOperation", "AccessDenied"}
# Glue's column types (PyIceberg's GLUE_PRIMITIVE_TYPES; Java's IcebergToGlueConverter agrees).
_GLUE_TYPES = {"boolean": "boolean", "int": "int", "long": "bigint", "float": "float", "double": "double",
               "date": "date", "time": "string", "string": "string", "uuid": "string",
               "timestamp": "timestamp", "timestamptz": "timestamp", "binary": "binary"}


def _boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise UsageError("the Glue catalog needs boto3, which is not installed",
                         hint=f"install it: {INSTALL_HINT}") from None
    return boto3


def _error_code(e: Exception) -> str:
    response = getattr(e, "response", None)
    return (response or {}).get("Error", {}).get("Code", "") if isinstance(response, dict) else ""


@dataclass
class GlueCatalog:
    """One Glue Data Catalog (a region of an account, or ``catalog id``) reached with boto3."""

    name: str
    io: FileIO
    warehouse: str = ""  # "" when not configured (a database's LocationUri may still place tables)
    region: str | None = None
    endpoint: str | None = None
    profile: str | None = None
    catalog_id: str | None = None  # another account's catalog; None: the caller's own
    skip_archive: bool = True  # Java's and PyIceberg's default: no Glue table version per commit
    credentials: dict[str, str] = field(default_factory=dict, repr=False)  # static keys; else boto3's chain
    source: str | None = None  # the config file, for messages
    _client: Any = field(default=None, repr=False)

    @property
    def table_is_its_folder(self) -> bool:
        return False

    @property
    def server_writes_metadata(self) -> bool:
        return False

    @classmethod
    def from_config(cls, cc: CatalogConfig, io: FileIO) -> GlueCatalog:
        source = cc.source
        props = {k.removeprefix("glue."): v for k, v in cc.properties.items()}
        unknown = sorted(set(props) - set(KEYS))
        where = f" in {source}" if source else ""
        if unknown:
            raise CorruptInputError(f"unknown key(s) {', '.join(unknown)} for Glue catalog '{cc.name}'{where}",
                                    path=source, hint=f"known keys: {', '.join(KEYS)}, warehouse")
        for k, v in props.items():
            if k != "skip-archive" and not isinstance(v, str):
                raise CorruptInputError(f"'{k}' of Glue catalog '{cc.name}' must be a string{where}", path=source)
        skip = props.get("skip-archive", True)
        if isinstance(skip, str):
            skip = skip.strip().lower() in ("true", "1", "yes")
        return cls(cc.name, io, warehouse=(cc.warehouse or "").rstrip("/"), region=props.get("region"),
                   endpoint=props.get("endpoint"), profile=props.get("profile"), catalog_id=props.get("id"),
                   skip_archive=bool(skip), source=source,
                   credentials={_BOTO_KEYS[k]: v for k, v in props.items() if k in _BOTO_KEYS})

    # ------------------------------------------------------------------ the client

    @property
    def client(self) -> Any:
        if self._client is None:
            boto3 = _boto3()
            from botocore.config import Config as BotoConfig
            from botocore.exceptions import BotoCoreError

            try:
                session = boto3.session.Session(profile_name=self.profile, region_name=self.region,
                                                **self.credentials)
                if session.region_name is None:
                    raise UsageError(f"Glue catalog '{self.name}' has no region",
                                     hint="set region = \"...\" in its config section or AWS_REGION")
                self._client = session.client(
                    "glue", endpoint_url=self.endpoint,
                    # standard retries (3 attempts unless AWS_MAX_ATTEMPTS or the profile says otherwise)
                    config=BotoConfig(connect_timeout=5, read_timeout=30, retries={"mode": "standard"}))
            except (BotoCoreError, ValueError) as e:  # an unknown profile; a bad endpoint URL (ValueError)
                raise CorruptInputError(f"cannot set up Glue catalog '{self.name}': {e}", path=self.source,
                                        hint="check region, endpoint and profile in the config") from e
        return self._client

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """One Glue API call; errors other than the ones callers handle become one-line IcectlErrors.

        Raises ``botocore`` ``ClientError`` untouched for EntityNotFound, AlreadyExists and
        ConcurrentModification (the callers know what they mean there).
        """
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        if self.catalog_id:
            params.setdefault("CatalogId", self.catalog_id)
        where = self.where
        try:
            return getattr(self.client, operation)(**params)
        except ClientError as e:
            code = _error_code(e)
            if code in ("EntityNotFoundException", "AlreadyExistsException", "ConcurrentModificationException"):
                raise
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if not code or code.isdigit():  # no Glue error document: something else answered
                raise StorageError(f"{where} answered {operation} with HTTP {status}, not as Glue does",
                                   hint=f"check endpoint and region of catalog '{self.name}'") from e
            # one line, however the server phrased it
            message = " ".join(str(e.response.get("Error", {}).get("Message", "") or e).split())[:300]
            if code in _ACCESS_ERRORS:
                raise StorageError(f"Glue ({where}) refused {operation}: {code}: {message}",
                                   hint="check the AWS credentials, profile and region of catalog "
                                        f"'{self.name}'") from e
            raise StorageError(f"Glue ({where}) failed {operation}: {code or 'error'}: {message}") from e
        except NoCredentialsError as e:
            raise StorageError(f"no AWS credentials for Glue catalog '{self.name}'",
                               hint="set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or profile = \"...\"") from e
        except BotoCoreError as e:  # connection refused, timeouts, DNS
            raise StorageError(f"cannot reach Glue at {where}: {e}",
                               hint=f"check endpoint and region of catalog '{self.name}'") from e

    @property
    def where(self) -> str:
        """The endpoint, or the region whose public endpoint boto3 uses."""
        return self.endpoint or f"region {self.client.meta.region_name}"

    def _pages(self, operation: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        seen: set[str] = set()
        while True:
            response = self.call(operation, **params, **({"NextToken": token} if token else {}))
            yield from response.get(key, [])
            token = response.get("NextToken")
            if not token:
                return
            if token in seen:  # a server repeating a page would loop forever
                raise StorageError(f"Glue ({self.where}) repeated page token of {operation}")
            seen.add(token)

    # ------------------------------------------------------------------ the Catalog protocol

    def database(self, namespace: tuple[str, ...]) -> str:
        if len(namespace) != 1 or not namespace[0]:
            raise UsageError(f"Glue namespaces have exactly one level, not '{'.'.join(namespace)}'",
                             hint="address Glue tables as database.table")
        return namespace[0]

    def list_namespaces(self, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        if parent:
            self.database(parent)
            return []  # Glue databases do not nest
        return [(d["Name"],) for d in self._pages("get_databases", "DatabaseList")]

    def list_tables(self, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        from botocore.exceptions import ClientError

        db = self.database(namespace)
        try:
            tables = list(self._pages("get_tables", "TableList", DatabaseName=db))
        except ClientError as e:
            raise self.not_found(e, db) from e
        return [(db, t["Name"]) for t in tables if is_iceberg(t)]

    def create_namespace(self, namespace: tuple[str, ...], properties: dict[str, str] | None = None, *,
                         exist_ok: bool = False) -> bool:
        from botocore.exceptions import ClientError

        db = self.database(namespace)
        props = dict(properties or {})
        database_input: dict[str, Any] = {"Name": db}
        if "location" in props:
            database_input["LocationUri"] = props.pop("location")
        if "Description" in props:
            database_input["Description"] = props.pop("Description")
        if props:
            database_input["Parameters"] = props
        try:
            self.call("create_database", DatabaseInput=database_input)
        except ClientError as e:
            if _error_code(e) != "AlreadyExistsException":
                raise
            if exist_ok:
                return False
            raise RefusedError(f"Glue database {db} already exists in catalog '{self.name}'") from e
        return True

    def default_table_location(self, namespace: tuple[str, ...], table: str) -> str | None:
        from botocore.exceptions import ClientError

        db = self.database(namespace)
        try:
            database = self.call("get_database", Name=db)["Database"]
        except ClientError as e:
            raise self.not_found(e, db) from e
        location = (database.get("LocationUri") or "").rstrip("/")
        if location:
            return f"{location}/{table}"
        if not self.warehouse:
            raise UsageError(f"Glue database {db} has no location and catalog '{self.name}' no warehouse",
                             hint="set warehouse = \"s3://bucket/path\" in the catalog's config or "
                                  "pass --location")
        return f"{self.warehouse}/{db}.db/{table}"

    def table_operations(self, namespace: tuple[str, ...], table: str) -> GlueOperations:
        return GlueOperations(self, (self.database(namespace),), table, self.io)

    def not_found(self, e: Exception, db: str) -> Exception:
        if _error_code(e) == "EntityNotFoundException":
            return NotFoundError(f"Glue database {db} does not exist in catalog '{self.name}'",
                                 hint=f"create it: icectl namespace create {self.name}.{db}")
        return e


def is_iceberg(table: Mapping[str, Any]) -> bool:
    return str((table.get("Parameters") or {}).get(TABLE_TYPE, "")).upper() == ICEBERG


# ---------------------------------------------------------------------------------------------
# Columns, as Java's IcebergToGlueConverter and PyIceberg's _to_columns describe the schema


def glue_type(t: IcebergType) -> str:
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, FixedType):
        return "binary"
    if isinstance(t, StructType):
        return f"struct<{','.join(f'{f.name}:{glue_type(f.field_type)}' for f in t.fields)}>"
    if isinstance(t, ListType):
        return f"array<{glue_type(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{glue_type(t.key_type)},{glue_type(t.value_type)}>"
    return _GLUE_TYPES.get(str(t), str(t))


def glue_columns(metadata: TableMetadata) -> list[dict[str, Any]]:
    """The current schema's columns, then dropped ones of older schemas (``iceberg.field.current``)."""
    columns: dict[str, dict[str, Any]] = {}

    def add(f: NestedField, current: bool) -> None:
        if f.name in columns:
            return
        column: dict[str, Any] = {"Name": f.name, "Type": glue_type(f.field_type), "Parameters": {
            "iceberg.field.id": str(f.field_id), "iceberg.field.optional": str(f.optional).lower(),
            "iceberg.field.current": str(current).lower()}}
        if f.doc:
            column["Comment"] = f.doc
        columns[f.name] = column

    current = metadata.schema_by_id(metadata.current_schema_id)
    for f in current.fields if current else ():
        add(f, True)
    for schema in metadata.schemas:
        if schema.schema_id != metadata.current_schema_id:
            for f in schema.fields:
                add(f, False)
    return list(columns.values())


def table_input(name: str, metadata: TableMetadata, parameters: dict[str, str],
                existing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """UpdateTable/CreateTable's ``TableInput``: replaces the whole Glue table, so what the table had
    and Iceberg does not own (other storage descriptor fields, description, owner) is carried over."""
    existing = existing or {}
    descriptor = {k: v for k, v in (existing.get("StorageDescriptor") or {}).items()}
    descriptor["Columns"] = glue_columns(metadata)
    if metadata.location:
        descriptor["Location"] = metadata.location
    out: dict[str, Any] = {"Name": name, "TableType": EXTERNAL_TABLE, "Parameters": parameters,
                           "StorageDescriptor": descriptor}
    for key in ("Description", "Owner", "Retention", "PartitionKeys"):
        if key in existing:
            out[key] = existing[key]
    if "Description" not in out and metadata.properties.get("comment"):
        out["Description"] = metadata.properties["comment"]
    return out


# ---------------------------------------------------------------------------------------------
# Commits


@dataclass
class GlueOperations(MetastoreOperations):
    """GlueTableOperations: the table's pointer is its Glue table's ``metadata_location``."""

    catalog: GlueCatalog
    namespace: tuple[str, ...]  # (database,)
    name: str
    io: FileIO

    @property
    def database(self) -> str:
        return self.namespace[0]

    @property
    def pointer_store(self) -> str:
        return f"Glue catalog '{self.catalog.name}' ({self.catalog.where})"

    def _get(self) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        try:
            table = self.catalog.call("get_table", DatabaseName=self.database, Name=self.name)["Table"]
        except ClientError as e:
            if _error_code(e) != "EntityNotFoundException":
                raise
            raise NotFoundError(f"table {self.identifier} does not exist in Glue catalog '{self.catalog.name}'",
                                hint="check the name: icectl list " + self.catalog.name) from e
        if not is_iceberg(table):
            kind = (table.get("Parameters") or {}).get(TABLE_TYPE) or table.get("TableType") or "no table_type"
            raise NotFoundError(f"Glue table {self.identifier} is not an Iceberg table ({kind})",
                                hint="icectl maintains Iceberg tables only")
        return table

    def current_pointer(self) -> str:
        location = (self._get().get("Parameters") or {}).get(METADATA_LOCATION)
        if not location:
            raise CorruptInputError(f"Glue table {self.identifier} is an Iceberg table without "
                                    f"{METADATA_LOCATION}", hint="register its metadata file again")
        return location

    def swap_pointer(self, base_location: str, new_location: str, metadata: TableMetadata) -> bool:
        from botocore.exceptions import ClientError

        table = self._get()
        parameters = dict(table.get("Parameters") or {})
        if parameters.get(METADATA_LOCATION) != base_location:
            return False  # Java's checkMetadataLocation: another writer committed since our refresh
        parameters.update({TABLE_TYPE: ICEBERG, METADATA_LOCATION: new_location,
                           PREVIOUS_METADATA_LOCATION: base_location})
        try:
            self.catalog.call("update_table", DatabaseName=self.database, SkipArchive=self.catalog.skip_archive,
                              VersionId=table["VersionId"],
                              TableInput=table_input(self.name, metadata, parameters, table))
        except ClientError as e:
            if _error_code(e) != "ConcurrentModificationException":
                raise NotFoundError(f"table {self.identifier} was dropped from Glue during the commit") from e
            # The VersionId condition failed: another writer updated the table, or boto3 retried our
            # request after its first attempt had landed (Java's RetryDetector case): look.
            return self._points_at(new_location)
        return True

    def _points_at(self, location: str) -> bool:
        return (self._get().get("Parameters") or {}).get(METADATA_LOCATION) == location

    def insert_pointer(self, location: str, metadata: TableMetadata) -> None:
        from botocore.exceptions import ClientError

        parameters = {TABLE_TYPE: ICEBERG, METADATA_LOCATION: location}
        try:
            self.catalog.call("create_table", DatabaseName=self.database,
                              TableInput=table_input(self.name, metadata, parameters))
        except ClientError as e:
            if _error_code(e) == "AlreadyExistsException":
                if self._points_at_quietly(location):
                    return  # boto3 retried our CreateTable after its first attempt had landed
                raise RefusedError(f"table {self.identifier} already exists in Glue catalog "
                                   f"'{self.catalog.name}'", hint="choose another name") from e
            raise self.catalog.not_found(e, self.database) from e

    def delete_pointer(self, expected_location: str) -> bool:
        """GlueCatalog.dropTable's DeleteTable, after checking the pointer still names ``expected``
        (Glue's DeleteTable takes no version condition: a commit landing between the two calls is
        Java's race too; the purge then misses that commit's new files, it never deletes more)."""
        from botocore.exceptions import ClientError

        if (self._get().get("Parameters") or {}).get(METADATA_LOCATION) != expected_location:
            return False
        try:
            self.catalog.call("delete_table", DatabaseName=self.database, Name=self.name)
        except ClientError as e:
            if _error_code(e) == "EntityNotFoundException":
                raise NotFoundError(f"table {self.identifier} was dropped from Glue catalog "
                                    f"'{self.catalog.name}' by another client meanwhile") from e
            raise
        return True

    def _points_at_quietly(self, location: str) -> bool:
        try:
            return self._points_at(location)
        except IcectlError:
            return False  # a non-Iceberg table of that name, or unreadable: the name is taken
