"""Exactly-once writes through a Kafka cluster (option ``exactlyOnce=true``, wire mode).

Each Spark task writes its rows in a Kafka transaction and leaves it open; the driver
ends every task's transaction when Spark commits or aborts the write. Only standard Kafka
APIs are used (``_txn``), so this works against any Kafka-protocol cluster with
transactions (Kafka >= 2.8, seglog serve).

Task (``write_in_transaction``):

1. The transactional id is ``<prefix>-<Spark partition id>``: the prefix names the write
   (batch: ``seglog-sink-<write id>``, the write id chosen on the driver; streaming:
   ``seglog-sink-<query id>``, the same across restarts from the checkpoint; option
   ``transactionalIdPrefix`` replaces ``seglog-sink``), never the attempt number. So a
   retried attempt's InitProducerId gets a new epoch, which fences the failed attempt
   and aborts its transaction before anything new is written.
2. Streaming only: the last micro-batch whose transaction committed for this id is read
   from the consumer group of the same name (OffsetFetch, ``require_stable``). If it is
   this batch id or later, the batch is a replay (the driver died after committing,
   before Spark recorded the commit): the rows are drained, nothing is written.
3. The rows are produced as transactional record batches (``_produce_raw`` with the
   transaction: AddPartitionsToTxn per partition, producer id/epoch, sequences from 0).
4. Streaming: the batch id is committed as the offset of every partition written, in the
   group named like the transactional id, inside the transaction (AddOffsetsToTxn +
   TxnOffsetCommit): it becomes visible exactly when the rows do.
5. The task returns ``TxnWritten`` (transactional id, producer id, epoch, partitions)
   without ending the transaction. A task that fails aborts it (best effort; otherwise
   the retry's fencing, the driver's ``abort`` or the transaction timeout does).

Driver (``commit_transactions`` / ``abort_transactions``, ``DRIVER_THREADS`` at once):
EndTxn(commit) for every task's transaction, resuming it by transactional id, producer
id and epoch (the way Flink's Kafka sink commits); a commit retried after a crash finds
the transaction CompleteCommit, which Kafka answers with NONE. ``abort`` ends them with
abort, and for each failed task (no message) bumps its transactional id's epoch
(InitProducerId), which aborts the transaction its last attempt left open, so
read_committed readers are not held at that task's first offset until
``transaction.timeout.ms``.

Guarantee and limits: read_committed readers see every row of a committed write once; a
task retry, a failed job and a replayed micro-batch leave nothing extra visible. A driver
crash in the middle of the commit loop leaves the batch partly committed; its replay then
writes only the tasks whose transactions had not committed (step 2 is per task), which is
exactly once when the replay gives each task the same rows (Spark replays the same
offsets through the same plan). Speculative execution must stay off: a speculative
attempt fences the first one. The per-id groups keep one committed offset per partition
written, kept for ``offsets.retention.minutes`` (7 days) after the last batch.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import kafka.errors as ke
import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from seglog.spark._options import WriteOptions
from seglog.spark._produce_raw import produce_raw
from seglog.spark._txn import Coordinators, Transaction, committed_offsets, end_txn

__all__ = [
    "TxnWritten",
    "abort_transactions",
    "batch_prefix",
    "checkpoint_query_id",
    "commit_transactions",
    "prefix_of",
    "stream_prefix",
    "transactional_id",
    "write_in_transaction",
]

DEFAULT_PREFIX = "seglog-sink"

T = TypeVar("T")


@dataclass(frozen=True)
class TxnWritten(WriterCommitMessage):
    """Commit message of one task of an exactly-once write."""

    partition_id: int
    """The Spark partition id of the task."""
    transactional_id: str
    producer_id: int
    """-1 when the task had no rows (no transaction)."""
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    """(topic, partition) added to the transaction; empty: nothing to end."""
    records: int
    replayed: bool = False
    """Streaming: this batch had already committed for this task; nothing was written."""


def transactional_id(prefix: str, partition_id: int) -> str:
    """``<prefix>-<partition id>``: one transactional id per task of a write."""
    return f"{prefix}-{partition_id}"


def batch_prefix(options: WriteOptions, write_id: str) -> str:
    """Prefix of a batch write's transactional ids (``write_id``: chosen on the driver)."""
    return f"{options.transactional_id_prefix or DEFAULT_PREFIX}-{write_id}"


def stream_prefix(options: WriteOptions, query_id: str) -> str:
    """Prefix of a streaming query's transactional ids (``query_id``: Spark's query id,
    the same across restarts from one checkpoint)."""
    return f"{options.transactional_id_prefix or DEFAULT_PREFIX}-{query_id}"


def _last_batch(coordinators: Coordinators, group: str) -> int:
    """The last micro-batch id committed in ``group`` (-1: none)."""
    return max(committed_offsets(coordinators, group).values(), default=-1)


def write_in_transaction(
    batches: Iterator[pa.RecordBatch],
    options: WriteOptions,
    prefix: str,
    partition_id: int,
    batch_id: int | None = None,
) -> TxnWritten:
    """Write one task's rows in a transaction left open (see the module doc);
    ``batch_id``: the micro-batch (streaming), recorded in the transaction. Raises the
    ``kafka.errors`` class of a refused request (InvalidTransactionTimeoutError when
    ``kafka.transaction.timeout.ms`` exceeds the cluster's maximum,
    TransactionalIdAuthorizationFailedError without WRITE on the transactional id)."""
    txn_id = transactional_id(prefix, partition_id)
    first = next(batches, None)
    if first is None:
        return TxnWritten(partition_id, txn_id, -1, -1, (), 0)
    coordinators = Coordinators(options.kafka)
    txn = Transaction(coordinators, txn_id)
    try:
        txn.init(options.transaction_timeout_ms)
        if batch_id is not None and _last_batch(coordinators, txn_id) >= batch_id:
            for _ in batches:  # a replay: Spark's input is drained, nothing written
                pass
            return TxnWritten(
                partition_id, txn_id, txn.producer_id, txn.producer_epoch, (), 0, replayed=True
            )
        count = produce_raw(itertools.chain([first], batches), options.kafka, options.topic, txn)
        if batch_id is not None and txn.partitions:
            metadata = json.dumps({"batch": batch_id, "records": count})
            txn.commit_offsets(txn_id, dict.fromkeys(txn.partitions, (batch_id, metadata)))
        return TxnWritten(
            partition_id,
            txn_id,
            txn.producer_id,
            txn.producer_epoch,
            tuple(sorted(txn.partitions)),
            count,
        )
    except BaseException:
        if txn.partitions:
            with contextlib.suppress(Exception):
                end_txn(coordinators, txn_id, txn.producer_id, txn.producer_epoch, commit=False)
        raise
    finally:
        coordinators.close()


def _written(messages: Sequence[WriterCommitMessage | None]) -> list[TxnWritten]:
    return [m for m in messages if isinstance(m, TxnWritten) and m.partitions]


_ENDED = (
    ke.ProducerFencedError,
    ke.InvalidProducerEpochError,
    ke.InvalidTxnStateError,
    ke.InvalidProducerIdMappingError,
)
"""EndTxn errors saying the transaction is no longer open at that epoch (ended, fenced by
a newer epoch, or unknown)."""

DRIVER_THREADS = 8
"""Threads (each with its own connections) the driver ends transactions with: EndTxn
waits for the coordinator's log write, so a write of many tasks commits in parallel."""


def _in_parallel(
    items: Sequence[T], options: WriteOptions, work: Callable[[Coordinators, T], None]
) -> None:
    """``work(coordinators, item)`` for every item, spread over up to ``DRIVER_THREADS``
    threads with a ``Coordinators`` each; every item is tried, then the first error (in
    item order) is raised."""
    indexed = list(enumerate(items))
    chunks = [indexed[k::DRIVER_THREADS] for k in range(min(DRIVER_THREADS, len(items)))]
    errors: dict[int, Exception] = {}

    def run(chunk: list[tuple[int, T]]) -> None:
        coordinators = Coordinators(options.kafka)
        try:
            for index, item in chunk:
                try:
                    work(coordinators, item)
                except Exception as exc:  # raised below, the first in item order
                    errors[index] = exc
        finally:
            coordinators.close()

    if len(chunks) <= 1:
        for chunk in chunks:
            run(chunk)
    else:
        with ThreadPoolExecutor(len(chunks), thread_name_prefix="seglog-end-txn") as pool:
            for done in [pool.submit(run, chunk) for chunk in chunks]:
                done.result()
    if errors:
        raise errors[min(errors)]


def commit_transactions(
    messages: Sequence[WriterCommitMessage | None], options: WriteOptions
) -> int:
    """EndTxn(commit) for the transaction of every task that wrote rows (in parallel,
    ``DRIVER_THREADS``); returns the records committed. A transaction already committed (a
    retried commit) counts as committed. Raises RuntimeError naming a task whose
    transaction had been aborted (fenced by a newer attempt of the same task, i.e.
    speculation, or past its timeout), after committing every other one."""

    def commit(coordinators: Coordinators, m: TxnWritten) -> None:
        try:
            end_txn(coordinators, m.transactional_id, m.producer_id, m.producer_epoch, commit=True)
        except _ENDED as exc:
            raise RuntimeError(
                f"seglog sink: the transaction of task {m.partition_id} "
                f"({m.transactional_id!r}, producer {m.producer_id} epoch "
                f"{m.producer_epoch}) was aborted before the commit ({type(exc).__name__}:"
                " a newer attempt of the task fenced it, or it outlived "
                "kafka.transaction.timeout.ms); its rows are not written"
            ) from exc

    written = _written(messages)
    _in_parallel(written, options, commit)
    return sum(m.records for m in written)


def abort_transactions(
    messages: Sequence[WriterCommitMessage | None], options: WriteOptions, prefix: str | None
) -> None:
    """EndTxn(abort) for every task's open transaction (ones already ended are left as
    they are), and a new epoch for the transactional id of every failed task (index of a
    None message; needs ``prefix``), which aborts whatever its last attempt left open.
    Raises only when the cluster cannot be reached."""

    def abort(coordinators: Coordinators, m: TxnWritten) -> None:
        with contextlib.suppress(*_ENDED):
            end_txn(coordinators, m.transactional_id, m.producer_id, m.producer_epoch,
                    commit=False)  # fmt: skip

    def fence(coordinators: Coordinators, txn_id: str) -> None:
        Transaction(coordinators, txn_id).init(options.transaction_timeout_ms)

    _in_parallel(_written(messages), options, abort)
    if prefix is not None:
        failed = [transactional_id(prefix, i) for i, m in enumerate(messages) if m is None]
        _in_parallel(failed, options, fence)


def prefix_of(messages: Sequence[WriterCommitMessage | None]) -> str | None:
    """The transactional id prefix of a write, from any of its tasks' messages."""
    for m in messages:
        if isinstance(m, TxnWritten):
            return m.transactional_id.rsplit("-", 1)[0]
    return None


def checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The query id Spark keeps in ``<checkpointLocation>/metadata`` (``{"id": ...}``),
    when the checkpoint is on a local file system; else None."""
    if not checkpoint:
        return None
    path = checkpoint.removeprefix("file://").removeprefix("file:")
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as f:
            found = json.loads(f.readline()).get("id")
    except (OSError, ValueError):
        return None
    return found if isinstance(found, str) else None
