"""The Spark engine's one primitive on the session's Spark (local[2]): a function over many items runs as
Spark tasks in Spark's Python workers and comes back in order; errors come back as themselves (issue 17)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from pyspark import cloudpickle

from icectl.engine import EngineSettings
from icectl.engine import spark as spark_engine_module
from icectl.errors import CorruptInputError, StorageError

# Spark's workers cannot import this test module: its functions travel by value (icectl's by reference).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def executor_pid_and_square(shared: int, item: int) -> tuple[int, int]:
    if item == shared:
        raise CorruptInputError(f"item {item} is damaged", path=f"/t/m{item}.avro", hint="run validate")
    if item == -shared:
        raise ValueError("a bug, not an icectl error")
    return os.getpid(), item * item


def test_items_run_as_spark_tasks_and_come_back_in_order(spark_engine: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_engine_module, "ITEMS_PER_TASK", 5)  # several windows, several tasks each
    before = spark_engine.report()
    got = list(spark_engine.map(executor_pid_and_square, list(range(40)), shared=10**6, description="squares"))
    assert [sq for _pid, sq in got] == [i * i for i in range(40)]
    assert os.getpid() not in {pid for pid, _sq in got}  # computed in Spark's Python workers, not here
    after = spark_engine.report()
    assert after.spark_jobs > before.spark_jobs and after.spark_tasks - before.spark_tasks >= 40 // 5


def test_range_partitioned_items_come_back_in_item_order(spark_engine: Any) -> None:
    keys = [(i % 5, -i) for i in range(60)]  # a partition value per item, not in item order
    got = list(spark_engine.map(executor_pid_and_square, list(range(60)), shared=10**6, description="bins",
                                range_keys=keys))
    assert [sq for _pid, sq in got] == [i * i for i in range(60)]


def test_an_icectl_error_on_an_executor_is_raised_as_itself(spark_engine: Any) -> None:
    with pytest.raises(CorruptInputError) as caught:
        list(spark_engine.map(executor_pid_and_square, list(range(20)), shared=13, description="squares"))
    assert caught.value.one_line() == "item 13 is damaged (file: /t/m13.avro); run validate"


def test_any_other_executor_failure_is_one_storage_error(spark_engine: Any) -> None:
    with pytest.raises(StorageError, match=r"a Spark job failed: .*ValueError: a bug, not an icectl error"):
        list(spark_engine.map(executor_pid_and_square, list(range(1, 20)), shared=-7, description="squares"))


def test_a_session_the_process_already_has_keeps_its_settings(spark_engine: Any) -> None:
    """Asking for a master while a session runs gets that session (Spark's getOrCreate): it is the
    user's, so icectl leaves its shuffle partitions alone (it sets them only in a session it starts)."""
    spark = spark_engine.spark
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        engine = spark_engine_module.SparkEngine.start(EngineSettings(name="spark", master="local[1]"))
        assert engine.spark is spark
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
