"""The ``seglog`` DataSource: Spark's Kafka source and sink interface over seglog topics.

``spark.read.format("seglog").option("subscribe", "events").load("data")`` reads a data
directory; ``df.write.format("seglog").option("topic", "events").save("data")`` appends to a
topic. See ``seglog.spark`` for the options.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from seglog.spark._options import ReadOptions, WriteOptions, parse_bool
from seglog.spark._reader import SeglogBatchReader, SeglogStreamReader
from seglog.spark._schema import spark_schema
from seglog.spark._typed import TypedRead, typed_read, typed_spark_schema
from seglog.spark._typed_write import typed_write
from seglog.spark._writer import SeglogArrowWriter, SeglogStreamArrowWriter

__all__ = ["SeglogDataSource"]


class SeglogDataSource(DataSource):
    """Python data source ``seglog`` (pyspark >= 4 Python Data Source API).

    Schema: Spark's Kafka source (``seglog.spark.spark_schema``), plus ``headers`` with
    ``includeHeaders=true``. Options are validated when a reader or writer is created and
    errors are ValueError naming the option.
    """

    @classmethod
    def name(cls) -> str:
        """``format("seglog")``."""
        return "seglog"

    def schema(self) -> StructType:
        """Kafka's row schema; ``headers`` only with ``includeHeaders=true``; ``key`` /
        ``value`` structs of their registered schemas with ``keyFormat`` / ``valueFormat``."""
        include = parse_bool(self.options.get("includeHeaders"), "includeHeaders", False)
        return typed_spark_schema(spark_schema(include), self._typed(streaming=False))

    def _typed(self, *, streaming: bool) -> TypedRead | None:
        """The typed-read plan (registry lookups on the driver), once per instance."""
        if not hasattr(self, "_typed_plan"):
            parsed = ReadOptions.parse(self.options, streaming=streaming)
            self._typed_plan = typed_read(self.options, parsed)
        return self._typed_plan

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader of a data directory between startingOffsets and endingOffsets."""
        options = ReadOptions.parse(self.options, streaming=False)
        return SeglogBatchReader(options, self._typed(streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """Micro-batch reader with maxOffsetsPerTrigger and availableNow support."""
        options = ReadOptions.parse(self.options, streaming=True)
        return SeglogStreamReader(options, self._typed(streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Append writer; ValueError for mode("overwrite") (topics are append-only)."""
        if overwrite:
            raise ValueError("seglog topics are append-only: use mode('append')")
        options = WriteOptions.parse(self.options)
        typed = typed_write(self.options, options, schema)
        return SeglogArrowWriter(options, dict(self.options), typed)

    def streamWriter(  # noqa: N802  (pyspark API names)
        self, schema: StructType, overwrite: bool
    ) -> DataSourceStreamWriter:
        """Streaming writer: exactly-once in path mode, at-least-once through a broker."""
        if overwrite:
            raise ValueError("seglog topics are append-only: use outputMode('append')")
        options = WriteOptions.parse(self.options)
        typed = typed_write(self.options, options, schema)
        return SeglogStreamArrowWriter(options, dict(self.options), typed)
