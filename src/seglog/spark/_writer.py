"""Batch and streaming writers of the ``seglog`` data source.

Path mode (``path`` = data directory) stages record batches from the tasks and lets the
driver-side ``commit`` append them (``_stage``): exactly-once for streaming queries, even
when Spark replays a micro-batch after a crash. Broker mode (``kafka.bootstrap.servers``)
produces from the tasks (``_produce``): at-least-once, like Spark's Kafka sink; with
``exactlyOnce=true`` each task writes in a Kafka transaction that the driver commits or
aborts with the write (``_exactly_once``). With ``valueFormat`` = ``avro`` | ``json`` |
``protobuf`` a struct ``value`` (``keyFormat``: ``key``) is first encoded in Confluent's wire
format (``_typed_write``).
A missing topic is created in path mode with ``partitions`` partitions (default 1).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from seglog.spark._encode import Router
from seglog.spark._exactly_once import (
    abort_transactions,
    batch_prefix,
    checkpoint_query_id,
    commit_transactions,
    prefix_of,
    stream_prefix,
    write_in_transaction,
)
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
        self.streaming = streaming
        self.write_id = uuid.uuid4().hex[:16]
        """A batch write's id, chosen on the driver (the writer is pickled to the tasks
        and to the commit): names its transactional ids in exactly-once mode."""
        self.checkpoint = raw.get("checkpointlocation") or raw.get("checkpointLocation")
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
        if opts.exactly_once:
            context = TaskContext.get()
            if context is None:
                raise RuntimeError("seglog sink: write() runs outside a Spark task")
            if not self.streaming:  # also inside a query's foreachBatch: a write of its own
                prefix = batch_prefix(opts, self.write_id)
                return write_in_transaction(iterator, opts, prefix, context.partitionId())
            # Spark's local properties of a micro-batch's jobs (MicroBatchExecution)
            query_id = context.getLocalProperty("sql.streaming.queryId")
            batch_id = context.getLocalProperty("streaming.sql.batchId")
            if query_id is None or batch_id is None:
                raise RuntimeError("seglog sink: a streaming task without a query or batch id")
            return write_in_transaction(
                iterator, opts, stream_prefix(opts, query_id), context.partitionId(),
                int(batch_id),
            )  # fmt: skip
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
        """Path mode: append every task's staged batches in task order, then sync.
        Exactly-once: commit every task's transaction."""
        if self.options.exactly_once:
            commit_transactions(messages, self.options)
        elif self.options.path:
            commit_batch(self.options.path, self.directory, messages, self.options.partitions)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Path mode: delete the staged files (nothing was appended). Exactly-once: abort
        every task's transaction, and those failed tasks left open."""
        if self.options.exactly_once:
            abort_transactions(messages, self.options, batch_prefix(self.options, self.write_id))
        elif self.options.path:
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
        """Path mode: append micro-batch ``batchId`` once; a replayed batchId is skipped.
        Exactly-once: commit every task's transaction (a replay's tasks wrote none)."""
        if self.options.exactly_once:
            commit_transactions(messages, self.options)
        elif self.options.path:
            commit_stream(
                self.options.path, self.directory, messages, batchId, self.options.partitions
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Path mode: delete the micro-batch's staged files. Exactly-once: abort the
        tasks' transactions (see ``SeglogArrowWriter.abort``)."""
        if self.options.exactly_once:
            prefix = prefix_of(messages)
            if prefix is None:
                query_id = checkpoint_query_id(self.checkpoint)
                prefix = None if query_id is None else stream_prefix(self.options, query_id)
            abort_transactions(messages, self.options, prefix)
        elif self.options.path:
            discard(self.directory, messages)
