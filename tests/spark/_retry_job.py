"""A Spark job in a session of its own, ``local[2,3]`` (each task tried up to 3 times): an
exactly-once write whose UDF fails every task's first attempt late in its rows, after
the attempt produced some. Run by test_exactly_once_retry.py as
``python -m tests.spark._retry_job BOOTSTRAP TOPIC ROWS``; exits 0 once the job succeeded."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

import seglog.spark

from ._exactly_once_helpers import failing_rows


def main(bootstrap: str, topic: str, rows: int) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2,3]")
        .appName("seglog-retry")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
        .getOrCreate()
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        seglog.spark.register(spark)
        half = rows // 2  # spark.range's two partitions: [0, half) and [half, rows)
        df = failing_rows(spark, rows, {half - 10, rows - 10}, first_attempt_only=True)
        (df.write.format("seglog").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("exactlyOnce", "true").mode("append").save())  # fmt: skip
        print("retried job committed")
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
