"""Spark writing topics (the streaming sink, path and wire) and reading them over the wire,
each next to its same-run reference.

- sink ceiling: ``format("seglog-noop-sink")``, a streaming Arrow writer that only counts
  the batches Spark hands it — what any Python sink could reach;
- ``writeStream.format("seglog")`` with ``path`` (staged, exactly once) and with
  ``kafka.bootstrap.servers`` (produced through ``seglog serve``, at-least-once), from the
  same Parquet files read as a stream, ``trigger(availableNow=True)``;
- ``spark.read.format("seglog")`` of the written topic through the broker vs by path.
"""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from seglog.bench._kafka import BenchError
from seglog.bench._report import Samples, measure
from seglog.bench._spark_results import SinkResults
from seglog.broker import start_broker

__all__ = ["NoopArrowSink", "count_rows", "spark_writes"]

_SCHEMA = (
    "key string, value string, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


class _Counted(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _NoopWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _Counted(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to undo."""


class NoopArrowSink(DataSource):
    """``writeStream.format("seglog-noop-sink")``: receives Arrow batches, keeps nothing."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "seglog-noop-sink"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        """A writer that counts rows."""
        return _NoopWriter()


def _stream_to(
    spark: Any, parquet: Path, rows: int, fmt: str, checkpoint: Path, **options: str
) -> float:
    values = (
        spark.readStream.schema(_SCHEMA)
        .parquet(str(parquet))
        .selectExpr("CAST(key AS BINARY) AS key", "CAST(value AS BINARY) AS value")
    )
    writer = values.writeStream.format(fmt).option("checkpointLocation", str(checkpoint))
    for name, value in options.items():
        writer = writer.option(name, value)
    start = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - start
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    written = sum(int(p.get("numInputRows", 0)) for p in query.recentProgress)
    if written != rows:
        raise RuntimeError(f"the query wrote {written} rows, expected {rows}")
    return rows / elapsed


def count_rows(make: Callable[[], Any], rows: int) -> float:
    """rows/s of ``make().count()`` (DataFrame creation included); BenchError unless the
    count is ``rows``."""
    start = time.perf_counter()
    n = make().count()
    elapsed = time.perf_counter() - start
    if n != rows:
        raise BenchError(f"count() gave {n} rows, expected {rows}")
    return rows / elapsed


def spark_writes(
    spark: Any,
    work: Path,
    parquet: Path,
    rows: int,
    *,
    repeat: int,
    progress: Callable[[str], None],
) -> SinkResults:
    """Stream the ``rows`` records of ``parquet`` into the three sinks ``repeat`` times
    (interleaved, fresh topic and checkpoint each time), then read the last topics back."""
    results = SinkResults()
    spark.dataSource.register(NoopArrowSink)
    broker = start_broker(work / "sink-broker", log_path=work / "sink-broker.log")
    wire = {"kafka.bootstrap.servers": broker.bootstrap}
    last = work / f"sink-{repeat - 1}"
    try:
        # one untimed query per sink first: the first streaming query of a session, and
        # the first into each sink, runs cold (code generation, Python workers importing
        # the sink) and was 5-8x slower than the next
        if repeat > 1:
            warm = work / "sink-warmup"
            _stream_to(spark, parquet, rows, "seglog-noop-sink", warm / "ck-noop")
            _stream_to(spark, parquet, rows, "seglog", warm / "ck-path",
                       path=str(warm / "data"), topic="sink")  # fmt: skip
            _stream_to(spark, parquet, rows, "seglog", warm / "ck-wire",
                       topic="sink-warmup", **wire)  # fmt: skip
            shutil.rmtree(warm, ignore_errors=True)
        for rnd in range(repeat):
            run, label = work / f"sink-{rnd}", f"{rnd + 1}/{repeat}"
            sinks: list[tuple[Samples, str, Callable[[], float]]] = [
                (results.ceiling, "no-op", functools.partial(
                    _stream_to, spark, parquet, rows, "seglog-noop-sink", run / "ck-noop")),
                (results.path, "path", functools.partial(
                    _stream_to, spark, parquet, rows, "seglog", run / "ck-path",
                    path=str(run / "data"), topic="sink")),
                (results.wire, "wire", functools.partial(
                    _stream_to, spark, parquet, rows, "seglog", run / "ck-wire",
                    topic=f"sink-{rnd}", **wire)),
            ]  # fmt: skip
            # a different sink first each round: measured, the wire sink ran 0.86-0.90x of
            # the ceiling after the no-op query and 0.74-0.77x right after a path query
            shift = rnd % len(sinks)
            for samples, name, write in sinks[shift:] + sinks[:shift]:
                measure(samples, progress, f"spark sink {name} {label}", write)

        def by_path() -> Any:
            return spark.read.format("seglog").option("subscribe", "sink").load(str(last / "data"))

        def by_wire() -> Any:
            reader = spark.read.format("seglog").option("subscribe", f"sink-{repeat - 1}")
            return reader.option("kafka.bootstrap.servers", broker.bootstrap).load()

        for rnd in range(repeat):
            label = f"{rnd + 1}/{repeat}"
            measure(results.read_path, progress, f"spark read path {label}",
                    functools.partial(count_rows, by_path, rows))  # fmt: skip
            measure(results.read_wire, progress, f"spark read wire {label}",
                    functools.partial(count_rows, by_wire, rows))  # fmt: skip
    finally:
        broker.stop()
        for rnd in range(repeat):
            shutil.rmtree(work / f"sink-{rnd}", ignore_errors=True)
        shutil.rmtree(work / "sink-broker", ignore_errors=True)
        shutil.rmtree(work / "sink-warmup", ignore_errors=True)
        (work / "sink-broker.log").unlink(missing_ok=True)
    return results
