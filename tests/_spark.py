"""The local SparkSession of the test suite (tests/spark and the Spark samples of the docs):
``local[2]``, Python workers on this interpreter, no UI, 2 shuffle partitions, UTC."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

__all__ = ["local_spark_session"]


def local_spark_session() -> Any:
    """The session (``getOrCreate``: an active one is returned as it is). Raises
    RuntimeError (never skips) when no Java runtime is on PATH."""
    if shutil.which("java") is None:
        raise RuntimeError(
            "the Spark tests need a Java 17/21 runtime on PATH: "
            "apt-get install openjdk-17-jre-headless"
        )
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only where Spark runs

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
