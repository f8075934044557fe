"""Real Spark 3.5 + Iceberg 1.10 for the test suite, built only from the test dependencies.

The environment comes from two pip packages (see ``[project.optional-dependencies] test``):

* ``pyspark==3.5.9``: Spark itself, plus stock Jackson 2.15.2 jars in ``pyspark/jars/``;
* ``snowpark-connect-deps-iceberg==1.0.3``: ships ``iceberg-spark-runtime-3.5_2.12-1.10.2.jar``.

That runtime jar was repackaged without its shaded Jackson
(``org/apache/iceberg/shaded/com/fasterxml/jackson/**``), so every metadata read/write dies with
``ClassNotFoundException: org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactoryBuilder``.
We rebuild the missing classes like a shade plugin would: copy pyspark's Jackson classes into an
extra jar, rewriting the package prefix inside every class file's constant pool.  The result is
cached per machine under ``~/.cache/icectl-tests/`` (``ICECTL_TEST_CACHE`` overrides).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyspark is imported lazily so that this module can be imported without it
    from pyspark.sql import SparkSession

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JACKSON_VERSION = "2.15.2"
JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")
JAVA17_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
# Debian's libpostgresql-jdbc-java: on the classpath whenever installed, so tests can add an Iceberg
# JdbcCatalog on PostgreSQL to the running session (JDBC drivers must be there at JVM start).
OPTIONAL_JARS = ("/usr/share/java/postgresql.jar",)
CATALOG = "local"

# Bump when the relocation logic changes so stale cached jars are not reused.
_RELOCATOR_REVISION = "1"

_JACKSON_SLASH = b"com/fasterxml/jackson/"
_JACKSON_DOT = b"com.fasterxml.jackson."
_SHADE_PREFIX_SLASH = b"org/apache/iceberg/shaded/"
_SHADE_PREFIX_DOT = b"org.apache.iceberg.shaded."
# Lookbehind keeps the rewrite idempotent: an already-shaded name is left alone.
_RELOCATE_RE = re.compile(
    rb"(?<!org/apache/iceberg/shaded/)com/fasterxml/jackson/"
    rb"|(?<!org\.apache\.iceberg\.shaded\.)com\.fasterxml\.jackson\."
)

_LOG4J2_PROPERTIES = """\
# Written by tests/support/spark.py: keep Spark/Hadoop/Iceberg quiet in test output.
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
# Spark forces the shell's level (WARN) onto the root logger and prints "Setting default log level"
# unless the PySpark gateway's logger is configured explicitly.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


# --------------------------------------------------------------------------- locating the jars


def _package_dir(module: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"python package {module!r} is not installed (pip install -e '.[test]')")
    return Path(next(iter(spec.submodule_search_locations)))


def pyspark_jars_dir() -> Path:
    """``pyspark/jars`` of the installed pyspark."""
    return _package_dir("pyspark") / "jars"


def iceberg_runtime_jar() -> Path:
    """The Iceberg Spark runtime jar shipped inside ``snowpark_connect_deps_iceberg/jars/``."""
    jar = _package_dir("snowpark_connect_deps_iceberg") / "jars" / ICEBERG_RUNTIME_JAR
    if not jar.is_file():
        raise RuntimeError(f"{jar} missing: need snowpark-connect-deps-iceberg==1.0.3")
    return jar


def jackson_input_jars() -> list[Path]:
    """pyspark's own Jackson jars that get relocated into the Iceberg shaded namespace."""
    jars = [pyspark_jars_dir() / f"{name}-{JACKSON_VERSION}.jar" for name in JACKSON_ARTIFACTS]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise RuntimeError(f"pyspark Jackson jars missing (need pyspark==3.5.9): {missing}")
    return jars


def cache_dir() -> Path:
    """Per-machine cache for built artefacts (``ICECTL_TEST_CACHE`` or ``~/.cache/icectl-tests``)."""
    root = os.environ.get("ICECTL_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "icectl-tests"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- Jackson relocation

# Constant-pool tags (JVMS §4.4) -> payload length in bytes; Utf8 (tag 1) is variable-length.
_CP_FIXED_PAYLOAD = {
    3: 4,  # Integer
    4: 4,  # Float
    5: 8,  # Long (takes two slots)
    6: 8,  # Double (takes two slots)
    7: 2,  # Class
    8: 2,  # String
    9: 4,  # Fieldref
    10: 4,  # Methodref
    11: 4,  # InterfaceMethodref
    12: 4,  # NameAndType
    15: 3,  # MethodHandle
    16: 2,  # MethodType
    17: 4,  # Dynamic
    18: 4,  # InvokeDynamic
    19: 2,  # Module
    20: 2,  # Package
}


def relocate_name(data: bytes) -> bytes:
    """Rewrite ``com/fasterxml/jackson/`` and ``com.fasterxml.jackson.`` to the Iceberg-shaded prefix.

    Safe on modified UTF-8: its multi-byte sequences never contain ASCII bytes.
    """
    return _RELOCATE_RE.sub(
        lambda m: (_SHADE_PREFIX_SLASH if m.group(0) == _JACKSON_SLASH else _SHADE_PREFIX_DOT) + m.group(0),
        data,
    )


def relocate_class_file(data: bytes) -> bytes:
    """Relocate Jackson references in one ``.class`` file by rewriting its CONSTANT_Utf8 entries.

    All class/descriptor/signature names and string literals live in Utf8 constants, so rewriting
    them (and only them) is what a shade plugin's remapper achieves.  Constant indices do not move,
    so the bytecode after the pool is copied unchanged.
    """
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a Java class file")
    (pool_count,) = struct.unpack_from(">H", data, 8)
    chunks: list[bytes] = [data[:10]]
    pos, index = 10, 1
    while index < pool_count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            text = relocate_name(data[pos + 3 : pos + 3 + length])
            if len(text) > 0xFFFF:
                raise ValueError("relocated Utf8 constant exceeds 65535 bytes")
            chunks.append(b"\x01" + struct.pack(">H", len(text)) + text)
            pos += 3 + length
            index += 1
            continue
        size = _CP_FIXED_PAYLOAD.get(tag)
        if size is None:
            raise ValueError(f"unknown constant-pool tag {tag} at offset {pos}")
        chunks.append(data[pos : pos + 1 + size])
        pos += 1 + size
        index += 2 if tag in (5, 6) else 1  # 8-byte constants occupy two pool slots
    chunks.append(data[pos:])
    return b"".join(chunks)


def build_relocated_jackson_jar(out: Path, inputs: list[Path]) -> int:
    """Write ``out`` with the classes of ``inputs`` relocated; returns the number of classes.

    Skips what a shaded runtime would not carry: manifests, Maven metadata, ``module-info`` and
    multi-release variants (the base Java 8 classes work on Java 17).  ``META-INF/services`` files
    are renamed and rewritten so ServiceLoader lookups of shaded interfaces keep working.
    """
    seen: set[str] = set()
    classes = 0
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        zout.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: icectl tests\n\n")
        for jar in inputs:
            with zipfile.ZipFile(jar) as zin:
                for info in zin.infolist():
                    name = info.filename
                    if info.is_dir() or name == "META-INF/MANIFEST.MF":
                        continue
                    if name.startswith(("META-INF/versions/", "META-INF/maven/")):
                        continue
                    if name.endswith("module-info.class"):
                        continue
                    data = zin.read(info)
                    if name.endswith(".class"):
                        data = relocate_class_file(data)
                        classes += 1
                    elif name.startswith("META-INF/services/"):
                        data = relocate_name(data)
                    elif name.startswith("META-INF/"):
                        # Licence/notice files collide between jars: keep each under its jar's name.
                        name = f"META-INF/{jar.stem}/{name[len('META-INF/') :]}"
                    new_name = relocate_name(name.encode()).decode()
                    if new_name in seen:
                        continue
                    seen.add(new_name)
                    zout.writestr(new_name, data)
    return classes


def shaded_jackson_jar() -> Path:
    """The relocated-Jackson jar, built once per machine and cached.

    The cache key covers the input jars' bytes and the relocator revision.  The jar is written to a
    temp file in the cache dir and renamed into place, so concurrent builders never see a half jar.
    """
    inputs = jackson_input_jars()
    key = hashlib.sha256(_RELOCATOR_REVISION.encode())
    for jar in inputs:
        key.update(jar.name.encode())
        key.update(hashlib.sha256(jar.read_bytes()).digest())
    out = cache_dir() / f"iceberg-shaded-jackson-{JACKSON_VERSION}-{key.hexdigest()[:12]}.jar"
    if out.is_file() and out.stat().st_size > 0:
        return out
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        build_relocated_jackson_jar(Path(tmp), inputs)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def spark_jars() -> list[Path]:
    """Jars for ``spark.jars``: the Iceberg runtime plus the relocated Jackson (+ installed OPTIONAL_JARS)."""
    return [iceberg_runtime_jar(), shaded_jackson_jar(), *(Path(j) for j in OPTIONAL_JARS if os.path.isfile(j))]


# --------------------------------------------------------------------------- the session


def _ensure_java_home() -> None:
    # pyspark finds java via JAVA_HOME or PATH; fall back to the known Java 17 location.
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    if os.path.isfile(os.path.join(JAVA17_HOME, "bin", "java")):
        os.environ["JAVA_HOME"] = JAVA17_HOME
        return
    raise RuntimeError("Java 17 not found: set JAVA_HOME (apt-get install openjdk-17-jre-headless)")


def _log4j2_config() -> Path:
    path = cache_dir() / "log4j2-quiet.properties"
    if not path.is_file() or path.read_text() != _LOG4J2_PROPERTIES:
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(_LOG4J2_PROPERTIES)
        os.replace(tmp, path)
    return path


WORKER_THREADS = 16


def spark_conf(warehouse: str) -> dict[str, str]:
    """All Spark settings used by :func:`start_spark` (exposed so tests can inspect/extend them)."""
    jars = ",".join(str(j) for j in spark_jars())
    quiet = f"-Dlog4j2.configurationFile=file:{_log4j2_config()}"
    return {
        "spark.master": "local[2]",
        "spark.app.name": "icectl-tests",
        "spark.jars": jars,
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{CATALOG}.type": "hadoop",
        f"spark.sql.catalog.{CATALOG}.warehouse": warehouse,
        # No table cache: tests change tables behind Spark's back (icectl), and a cached Table would
        # keep serving the old snapshot for up to 30 s.
        f"spark.sql.catalog.{CATALOG}.cache-enabled": "false",
        # Loopback only: CI containers often have no resolvable hostname.
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Tiny data: few partitions means few tasks and few (deterministic) output files.
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
        # days(ts) partitions and timestamp rendering must not depend on the machine's zone.
        "spark.sql.session.timeZone": "UTC",
        # Iceberg's worker pool (default: one thread per core). Iceberg 1.10's ManifestFilterManager
        # decides which delete manifests a commit that removes data files scans for delete files older
        # than every live data file by a race between those threads (fixed in 1.11, apache/iceberg#16686):
        # with fewer threads than delete manifests it skips some, and which depends on the machine.
        # With more threads than any fixture's delete manifests it drops them all, as 1.11 and icectl do.
        "spark.driver.extraJavaOptions": f"{quiet} -Duser.timezone=UTC -Diceberg.worker.num-threads={WORKER_THREADS}",
        "spark.executor.extraJavaOptions": quiet,
        "spark.driver.memory": "1g",
    }


def start_spark(warehouse: str, extra_conf: Mapping[str, str] | None = None) -> SparkSession:
    """Start a local Spark session with an Iceberg Hadoop catalog ``local`` rooted at ``warehouse``.

    Only one session per process: Spark reuses an active session and ignores static settings, so a
    mismatching warehouse is an error rather than a silent surprise.
    """
    _ensure_java_home()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in {**spark_conf(warehouse), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    actual = spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")
    if actual != warehouse:
        raise RuntimeError(f"a Spark session with warehouse {actual!r} is already running")
    return spark


def timed_start_spark(warehouse: str) -> tuple[SparkSession, float]:
    """:func:`start_spark` plus one trivial Iceberg query (warms the JVM); returns (session, seconds)."""
    t0 = time.perf_counter()
    spark = start_spark(warehouse)
    spark.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()
    return spark, time.perf_counter() - t0


# --------------------------------------------------------------------------- inspection helpers


def _as_query(table_or_sql: str) -> str:
    text = table_or_sql.strip()
    if re.match(r"(?is)^(select|with|values|table)\b", text):
        return text
    return f"SELECT * FROM {text}"


def table_rows_digest(spark: SparkSession, table_or_sql: str) -> tuple[int, str]:
    """``(row count, order-independent digest)`` over all columns of a table or a query.

    Computed by actually scanning rows (``count(*)`` alone may be answered from manifest stats).
    Each row becomes canonical JSON of all its columns (names included, so a NULL in column a is not
    confused with a NULL in column b); the digest is the sum of 2x60-bit slices of each row's
    SHA-256, i.e. a multiset hash: row order and file layout do not matter, duplicates do.
    """
    inner = _as_query(table_or_sql)
    row = spark.sql(
        f"""
        SELECT count(*) AS n,
               coalesce(sum(CAST(conv(substr(h, 1, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS a,
               coalesce(sum(CAST(conv(substr(h, 16, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS b
        FROM (SELECT sha2(to_json(struct(*)), 256) AS h FROM ({inner}) AS q) AS hashed
        """
    ).collect()[0]
    return int(row["n"]), f"{int(row['a']):x}-{int(row['b']):x}"


def _plain(value: Any) -> Any:
    # Row.asDict(recursive=True) still leaves bytearray for binary columns and Rows inside maps.
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "asDict"):
        return [_plain(v) for v in value]
    if hasattr(value, "asDict"):
        return _plain(value.asDict(recursive=True))
    return value


def metadata_table(spark: SparkSession, table: str, kind: str) -> list[dict[str, Any]]:
    """Rows of an Iceberg metadata table (``snapshots``, ``files``, ``entries``, ``manifests``,
    ``all_manifests``, ``history``, ``refs``, ``partitions``, ``metadata_log_entries``,
    ``delete_files``, ``data_files``, ``all_files`` ...) as plain Python dicts."""
    if not re.fullmatch(r"[a-z_]+", kind):
        raise ValueError(f"bad metadata table name {kind!r}")
    return [_plain(r.asDict(recursive=True)) for r in spark.table(f"{table}.{kind}").collect()]


def table_location(spark: SparkSession, table: str) -> Path:
    """Filesystem directory of an Iceberg table (the ``location`` from ``DESCRIBE TABLE EXTENDED``)."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        if row["col_name"] == "Location":
            loc = str(row["data_type"])
            return Path(loc[len("file:") :] if loc.startswith("file:") else loc)
    raise RuntimeError(f"no Location for {table}")


def latest_metadata_path(table_dir: str | os.PathLike[str]) -> Path:
    """Current ``vN.metadata.json`` of a Hadoop-catalog table, found as Java's refresh finds it:
    from ``metadata/version-hint.text``, then forward while ``v<N+1>`` exists. The hint alone can
    be stale: it is written after the commit, best effort (Java leaks its temp file when its
    rename loses a race), so a table under concurrent commits may have newer versions."""
    meta = Path(table_dir) / "metadata"

    def version_file(version: int) -> Path | None:
        for name in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
            if (meta / name).is_file():
                return meta / name
        return None

    version = int((meta / "version-hint.text").read_text().strip())
    found = version_file(version)
    if found is None:
        raise FileNotFoundError(f"metadata v{version} missing in {meta}")
    while (newer := version_file(version + 1)) is not None:
        version, found = version + 1, newer
    return found


def latest_metadata_json(table_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Parsed current metadata JSON of a Hadoop-catalog table."""
    import gzip
    import json

    path = latest_metadata_path(table_dir)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)
