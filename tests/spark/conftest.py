"""One local SparkSession for the Spark tests, and helpers that fill data directories."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import seglog.spark  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2] SparkSession, Python workers on this interpreter, no UI, 2 shuffle partitions.

    Raises RuntimeError (never skips) when no Java runtime is on PATH.
    """
    if shutil.which("java") is None:
        raise RuntimeError(
            "the Spark tests need a Java 17/21 runtime on PATH: "
            "apt-get install openjdk-17-jre-headless"
        )
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
    yield session
    session.stop()
