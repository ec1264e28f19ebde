"""Batch and streaming writers of the ``seglog`` data source.

Path mode (``path`` = data directory) stages record batches from the tasks and lets the
driver-side ``commit`` append them (``_stage``): exactly-once for streaming queries, even
when Spark replays a micro-batch after a crash. Broker mode (``kafka.bootstrap.servers``)
produces from the tasks (``_produce``): at-least-once, like Spark's Kafka sink.
With ``valueFormat=avro`` a struct ``value`` (``keyFormat``: ``key``) is first encoded as
Confluent-framed Avro (``_typed_write``).
A missing topic is created in path mode with ``partitions`` partitions (default 1).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from seglog.spark._encode import Router
from seglog.spark._options import WriteOptions
from seglog.spark._produce import produce
from seglog.spark._stage import (
    commit_batch,
    commit_stream,
    discard,
    open_writer,
    sink_dir,
    stage,
)
from seglog.spark._typed_write import TypedWrite, encode_typed
from seglog.storage import DataDir

__all__ = ["SeglogArrowWriter", "SeglogStreamArrowWriter"]


class _Writing:
    """What both writers share: options, the sink directory and topic partition counts."""

    def __init__(
        self,
        options: WriteOptions,
        raw: dict[str, str],
        streaming: bool,
        typed: TypedWrite | None = None,
    ) -> None:
        self.options = options
        self.typed = typed
        self.directory = (
            sink_dir(options.path, raw, options.topic, streaming) if options.path else ""
        )
        self.counts: dict[str, int] = {}
        if options.path and options.topic:
            self.counts[options.topic] = _ensure_topic(
                options.path, options.topic, options.partitions
            )
        elif options.path and os.path.isdir(options.path):
            # topic column: snapshot the partition counts here, on the driver; topics that do
            # not exist yet get ``partitions`` partitions when the commit creates them
            with DataDir(options.path, create=False, read_only=True) as data_dir:
                self.counts = {name: info.partitions for name, info in data_dir.topics().items()}

    def _partition_count(self, topic: str) -> int:
        return self.counts.get(topic, self.options.partitions)

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        opts = self.options
        iterator = encode_typed(iterator, self.typed)
        if opts.path is None:
            produce(iterator, opts.kafka, opts.topic)
            return WriterCommitMessage()
        router = Router(self._partition_count)
        return stage(iterator, self.directory, opts.topic, router, opts.compression)


def _ensure_topic(path: str, topic: str, partitions: int) -> int:
    """Partition count of ``topic``, creating it with ``partitions`` if missing."""
    data_dir = open_writer(path)
    try:
        info = data_dir.topics().get(topic)
        if info is None:
            info = data_dir.create_topic(topic, partitions)
        return int(info.partitions)
    finally:
        data_dir.close()


class SeglogArrowWriter(_Writing, DataSourceArrowWriter):
    """``df.write.format("seglog")``: append a DataFrame's rows to a topic."""

    def __init__(
        self, options: WriteOptions, raw: dict[str, str], typed: TypedWrite | None = None
    ) -> None:
        _Writing.__init__(self, options, raw, streaming=False, typed=typed)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """Stage (path mode) or produce (broker mode) one task's rows."""
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Path mode: append every task's staged batches in task order, then sync."""
        if self.options.path:
            commit_batch(self.options.path, self.directory, messages, self.options.partitions)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Path mode: delete the staged files (nothing was appended)."""
        if self.options.path:
            discard(self.directory, messages)


class SeglogStreamArrowWriter(_Writing, DataSourceStreamArrowWriter):
    """``writeStream.format("seglog")``: exactly-once in path mode (see ``_stage``)."""

    def __init__(
        self, options: WriteOptions, raw: dict[str, str], typed: TypedWrite | None = None
    ) -> None:
        _Writing.__init__(self, options, raw, streaming=True, typed=typed)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """Stage (path mode) or produce (broker mode) one task's rows of a micro-batch."""
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Path mode: append micro-batch ``batchId`` once; a replayed batchId is skipped."""
        if self.options.path:
            commit_stream(
                self.options.path, self.directory, messages, batchId, self.options.partitions
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Path mode: delete the micro-batch's staged files."""
        if self.options.path:
            discard(self.directory, messages)
