"""``seglog bench``: seglog's throughput next to references measured in the same run.

From one run: produce MB/s and msgs/s through a real ``seglog serve`` with confluent-kafka
(1 KiB and 100 B values, acks=all, default fsync-before-ack policy) next to the raw
``os.write`` + ``os.fdatasync`` rate of 1 MiB appends on the same disk and the client-only
rate (librdkafka's mock cluster); fetch MB/s; embedded publish/consume; and Spark batch
reads of a topic next to Spark reading the same records from Parquet and JSON lines;
then the storage engine's section (``_storage_bench``; ``--skip-storage``).
Medians of ``repeat`` runs; ratios are median(seglog) / median(reference). See
docs/benchmarks.md.

    from seglog.bench import BenchOptions, run_bench
    report = run_bench(BenchOptions.quick(skip_spark=True), progress=print)
    print(report.markdown())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seglog.bench._disk import raw_append_rate
from seglog.bench._kafka import Rate, create_topic, fetch_confluent, produce
from seglog.bench._report import Report, Row, Samples
from seglog.bench._run import BenchOptions, machine_info, run_bench
from seglog.bench._typed_data import (
    FLIGHT_PROTO,
    FLIGHT_SCHEMA,
    ORDER_PROTO,
    flight_avro,
    flight_protobuf,
    message_class,
    order_protobuf,
    proto_layout_of,
)

__all__ = [
    "FLIGHT_PROTO",
    "FLIGHT_SCHEMA",
    "ORDER_PROTO",
    "BenchOptions",
    "Rate",
    "Report",
    "Row",
    "Samples",
    "create_topic",
    "fetch_confluent",
    "flight_avro",
    "flight_protobuf",
    "machine_info",
    "message_class",
    "order_protobuf",
    "produce",
    "proto_layout_of",
    "raw_append_rate",
    "run_bench",
    "spark_session",
    "spark_typed_reads",
]


def spark_session() -> object:
    """The benchmarks' local SparkSession (``local[2]``, 4 GiB driver, Arrow on; PySpark
    workers on this interpreter). Imports PySpark: needs the ``spark`` extra and a JDK."""
    from seglog.bench._spark import spark_session as session  # noqa: PLC0415

    return session()


def spark_typed_reads(spark: Any, work: Path, rows: int, repeat: int, progress: Any) -> Any:
    """``_spark_typed.typed_reads``: typed Avro reads against the same rows read as binary
    (``benchmarks/spark_typed_bench.py``). Imports PySpark."""
    from seglog.bench._spark_typed import typed_reads  # noqa: PLC0415

    return typed_reads(spark, work, rows, repeat, progress)
