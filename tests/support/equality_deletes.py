"""Equality deletes on Spark-written tables: Spark itself writes none (its row-level operations
write position deletes and DVs), so tests write the delete file as Flink does (Parquet with field
ids) and commit it with Iceberg Java's ``RowDelta`` in Spark's JVM."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from support.fixtures import FixtureTable
from support.spark import latest_metadata_json


def commit_equality_deletes(spark: Any, t: FixtureTable, rows: dict[str, list[Any]], types: dict[str, Any],
                             partition_path: str | None) -> None:
    """Write an equality delete file (Parquet with field ids, as Flink writes them) and commit it
    with Iceberg Java's RowDelta, in Spark's JVM: Spark itself writes no equality deletes."""
    md = latest_metadata_json(t.location)
    ids = {f["name"]: f["id"] for f in md["schemas"][-1]["fields"]}
    schema = pa.schema([pa.field(n, types[n], metadata={b"PARQUET:field_id": str(ids[n]).encode()}) for n in rows])
    path = t.location / "data" / f"eq-{uuid.uuid4()}.parquet"
    pq.write_table(pa.table(rows, schema=schema), path)
    jvm = spark._jvm
    jt = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, t.name)
    field_ids = spark.sparkContext._gateway.new_array(jvm.int, len(rows))
    for i, n in enumerate(rows):
        field_ids[i] = ids[n]
    builder = (jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(jt.spec()).ofEqualityDeletes(field_ids)
               .withPath(str(path)).withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
               .withFileSizeInBytes(path.stat().st_size).withRecordCount(len(next(iter(rows.values())))))
    if partition_path is not None:
        builder = builder.withPartitionPath(partition_path)
    jt.newRowDelta().addDeletes(builder.build()).commit()
    spark.sql(f"REFRESH TABLE {t.name}")
