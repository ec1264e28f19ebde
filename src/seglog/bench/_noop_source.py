"""The Python Data Source ceiling: a source that does no work at all.

``format("seglog-noop")`` yields one pre-built Arrow record batch (Spark's Kafka-source
columns, ``rows`` rows split over ``partitions``, keys cycling through ``keys`` values of
``value_size``-byte values) again and again. Whatever a real Python data source does, it
cannot read faster than this through pyspark's Python Data Source API; the benchmark
measures ``format("seglog")`` against it in the same run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from seglog.columnar import arrow_schema
from seglog.spark import spark_schema

__all__ = ["BATCH_ROWS", "NoopArrowSource"]

BATCH_ROWS = 65_536
"""Rows of the pre-built batch (the seglog reader's order of magnitude per Arrow batch)."""


@dataclass(frozen=True)
class _Slice(InputPartition):
    partition: int
    rows: int


@functools.cache
def _batch(value_size: int, keys: int, topic: str = "noop") -> pa.RecordBatch:
    n = BATCH_ROWS
    filler = (b"abcdefghijklmnopqrstuvwxyz0123456789" * (value_size // 36 + 1))[:value_size]
    columns = [
        pa.array([b"key-%04d" % (i % keys) for i in range(n)], pa.binary()),
        pa.array([filler] * n, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array(np.zeros(n, dtype=np.int32)),
        pa.array(np.arange(n, dtype=np.int64)),
        pa.array(np.full(n, 1_700_000_000_000_000, dtype=np.int64), pa.timestamp("us", tz="UTC")),
        pa.array(np.zeros(n, dtype=np.int32)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema())


class _Reader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, value_size: int, keys: int, topic: str) -> None:
        self.rows, self.parts, self.value_size, self.keys = rows, partitions, value_size, keys
        self.topic = topic

    def partitions(self) -> Sequence[InputPartition]:
        share, extra = divmod(self.rows, self.parts)
        return [_Slice(p, share + (1 if p < extra else 0)) for p in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Slice)
        batch = _batch(self.value_size, self.keys, self.topic)
        left = partition.rows
        while left >= BATCH_ROWS:
            yield batch
            left -= BATCH_ROWS
        if left:
            yield batch.slice(0, left)


class NoopArrowSource(DataSource):
    """``format("seglog-noop")``; options ``rows``, ``partitions`` (2), ``valueSize``
    (100 bytes), ``keys`` (1000), ``topic`` (the ``topic`` column, "noop"; the benchmark
    passes the measured topic's name so both sources hand Spark the same bytes)."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "seglog-noop"

    def schema(self) -> StructType:
        """Spark's Kafka-source schema, as ``format("seglog")``."""
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader yielding the pre-built batch."""
        return _Reader(
            int(self.options["rows"]),
            int(self.options.get("partitions", "2")),
            int(self.options.get("valueSize", "100")),
            int(self.options.get("keys", "1000")),
            self.options.get("topic", "noop"),
        )
