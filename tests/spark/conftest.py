"""One local SparkSession for the Spark tests, and helpers that fill data directories."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from tests._s3 import CREDENTIALS
from tests._spark import local_spark_session

import seglog.spark  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)

# the executors' Python workers inherit the JVM's environment, fixed when the session
# starts: the tiered-storage tests' S3 credentials (moto's dummies) must be there first
for _name, _value in CREDENTIALS.items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2] SparkSession, Python workers on this interpreter, no UI, 2 shuffle partitions.

    Raises RuntimeError (never skips) when no Java runtime is on PATH.
    """
    session = local_spark_session()
    yield session
    session.stop()
