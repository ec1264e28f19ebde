"""Kafka transactions from the client side, for the exactly-once sink (``_exactly_once``).

What a Java producer's ``TransactionManager`` sends, as separate calls so that a Spark task
can open a transaction and the driver end it later (the way Flink's Kafka sink resumes a
transaction by transactional id, producer id and epoch): FindCoordinator (key type 1,
TRANSACTION; 0 for a group), InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and OffsetFetch with ``require_stable``. Requests
are kafka-python's schemas over the broker's blocking wire client
(``seglog.broker.KafkaConnection``), at versions every Kafka >= 2.8 and 4.x serve, with the
pre-KIP-890-part-2 semantics (transaction version 1: partitions added explicitly, the
producer epoch unchanged by EndTxn), which Kafka 4.x keeps for clients at these versions.

Retries, as the Java client: CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS
are retried on the same coordinator, NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE after
finding it again, UNSTABLE_OFFSET_COMMIT (a transaction with offsets for the group is
still open) for OffsetFetch, and a lost connection is opened again; every other error
raises its ``kafka.errors`` class, and a retriable one raises once ``timeout_s`` has
passed.

Record batches of a transaction (:func:`stamp_batch`): attributes bit 4 (isTransactional),
the producer id and epoch, and a base sequence counted per partition from 0 for each
producer epoch (Kafka's idempotent producer), the CRC-32C recomputed.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import crc32c
import kafka.errors as ke
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from seglog.broker import KafkaConnection, split_host_port
from seglog.spark._fetch import raw_security

__all__ = [
    "ATTR_TRANSACTIONAL",
    "GROUP",
    "TRANSACTION",
    "Coordinators",
    "Transaction",
    "committed_offsets",
    "end_txn",
    "stamp_batch",
]

GROUP = 0
"""FindCoordinator key type of a consumer group."""
TRANSACTION = 1
"""FindCoordinator key type of a transactional id."""

_RETRY_SAME = frozenset(
    {
        ke.ConcurrentTransactionsError.errno,
        ke.CoordinatorLoadInProgressError.errno,
        ke.UnstableOffsetCommitError.errno,
    }
)
_FIND_AGAIN = frozenset({ke.NotCoordinatorError.errno, ke.CoordinatorNotAvailableError.errno})


class Coordinators:
    """Connections to a cluster's coordinators, found through ``bootstrap.servers``.

    ``kafka``: the ``kafka.*`` options without their prefix (the wire client's names,
    ``seglog.broker.CLIENT_OPTIONS``). Raises as ``KafkaConnection`` (OSError when no
    broker answers, SaslAuthenticationFailedError on a refused login)."""

    def __init__(self, kafka: Mapping[str, str], timeout_s: float = 60.0) -> None:
        self.timeout_s = timeout_s
        self._client_id = kafka.get("client.id", "seglog-spark")
        self._security = raw_security(kafka)
        self._bootstrap = [split_host_port(s) for s in kafka["bootstrap.servers"].split(",")]
        self._conns: dict[tuple[str, int], KafkaConnection] = {}
        self._found: dict[tuple[int, str], tuple[str, int]] = {}

    def _conn(self, address: tuple[str, int]) -> KafkaConnection:
        conn = self._conns.get(address)
        if conn is None:
            conn = KafkaConnection(*address, self._client_id, 30.0, self._security)
            self._conns[address] = conn
        return conn

    def find(self, key: str, key_type: int) -> KafkaConnection:
        """The connection to the coordinator of ``key`` (FindCoordinator v3, cached)."""
        address = self._found.get((key_type, key))
        if address is None:
            req = FindCoordinatorRequest[3](key=key, key_type=key_type)
            answer = self.call_retrying(
                lambda: self._conn(self._bootstrap[0]),
                req,
                lambda r: r.error_code,
                f"FindCoordinator {key!r}",
            )
            address = (answer.host, int(answer.port))
            self._found[(key_type, key)] = address
        return self._conn(address)

    def call_retrying(
        self,
        conn: Callable[[], KafkaConnection],
        request: Any,
        error: Callable[[Any], int],
        what: str,
    ) -> Any:
        """``conn().call(request)`` until ``error(answer)`` is 0 (see the module doc for
        what is retried); raises the ``kafka.errors`` class of any other code. A lost
        connection (OSError: the broker restarted, a coordinator moved) is opened again
        and the request resent until ``timeout_s``: every request here may be repeated
        (a repeated EndTxn finds its transaction ended with that result: NONE)."""
        deadline = time.monotonic() + self.timeout_s
        tries = 0
        while True:
            try:
                answer = conn().call(request)
            except OSError:
                self._drop_connections()
                tries += 1
                if time.monotonic() > deadline:
                    raise
                time.sleep(min(0.1 * tries, 1.0))
                continue
            code = error(answer)
            if not code:
                return answer
            tries += 1
            if (code not in _RETRY_SAME and code not in _FIND_AGAIN) or (
                time.monotonic() > deadline
            ):
                raise ke.for_code(code)(f"seglog sink: {what}")
            if code in _FIND_AGAIN:
                self._found.clear()
            time.sleep(min(0.02 * tries, 0.5))

    def _drop_connections(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._found.clear()

    def coordinator_call(
        self, key: str, key_type: int, request: Any, error: Callable[[Any], int], what: str
    ) -> Any:
        """``call_retrying`` on the coordinator of ``key``, found again when it moved."""
        return self.call_retrying(lambda: self.find(key, key_type), request, error, what)

    def close(self) -> None:
        """Close every connection."""
        self._drop_connections()


@dataclass
class Transaction:
    """One producer's transaction: its transactional id, producer id and epoch, the
    partitions added to it and the next sequence of each."""

    coordinators: Coordinators
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    def init(self, timeout_ms: int) -> None:
        """InitProducerId v4 with the transactional id: a new epoch, which fences every
        earlier producer of the id and aborts its open transaction (the coordinator
        answers CONCURRENT_TRANSACTIONS until that abort is done: retried).
        INVALID_TRANSACTION_TIMEOUT when ``timeout_ms`` exceeds the cluster's
        ``transaction.max.timeout.ms``."""
        req = InitProducerIdRequest[4](
            transactional_id=self.transactional_id,
            transaction_timeout_ms=timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        try:
            answer = self.coordinators.coordinator_call(
                self.transactional_id,
                TRANSACTION,
                req,
                lambda r: r.error_code,
                f"InitProducerId {self.transactional_id!r}",
            )
        except ke.InvalidTransactionTimeoutError as exc:
            raise ke.InvalidTransactionTimeoutError(
                f"seglog sink: kafka.transaction.timeout.ms={timeout_ms} is above the "
                "cluster's transaction.max.timeout.ms: lower the option or raise the maximum"
            ) from exc
        self.producer_id, self.producer_epoch = int(answer.producer_id), int(answer.producer_epoch)
        self.partitions.clear()
        self.sequences.clear()

    def add_partition(self, topic: str, partition: int) -> None:
        """AddPartitionsToTxn v3 for ``topic``-``partition`` unless already added (a
        transactional produce to a partition not added is refused)."""
        if (topic, partition) in self.partitions:
            return
        req = AddPartitionsToTxnRequest[3]
        request = req(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[req.AddPartitionsToTxnTopic(name=topic, partitions=[partition])],
        )
        self.coordinators.coordinator_call(
            self.transactional_id,
            TRANSACTION,
            request,
            _partition_error,
            f"AddPartitionsToTxn {topic}-{partition} to {self.transactional_id!r}",
        )
        self.partitions.add((topic, partition))

    def next_sequence(self, topic: str, partition: int, records: int) -> int:
        """The base sequence of the next batch of ``records`` records to the partition."""
        first = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = (first + records) & 0x7FFFFFFF
        return first

    def commit_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], tuple[int, str]]
    ) -> None:
        """AddOffsetsToTxn v3 then TxnOffsetCommit v3 (no member, generation -1): the
        ``{(topic, partition): (offset, metadata)}`` of ``group`` become its committed
        offsets when, and only if, the transaction commits."""
        add = AddOffsetsToTxnRequest[3](
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            group_id=group,
        )
        self.coordinators.coordinator_call(
            self.transactional_id,
            TRANSACTION,
            add,
            lambda r: r.error_code,
            f"AddOffsetsToTxn {group!r}",
        )
        req = TxnOffsetCommitRequest[3]
        topics: dict[str, list[Any]] = {}
        for (topic, part), (offset, metadata) in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                    partition_index=part,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=metadata,
                )
            )
        request = req(
            transactional_id=self.transactional_id,
            group_id=group,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                req.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()
            ],
        )
        self.coordinators.coordinator_call(
            group, GROUP, request, _offsets_error, f"TxnOffsetCommit {group!r}"
        )


def _partition_error(answer: Any) -> int:
    """The first partition error of an AddPartitionsToTxn v0-v3 answer."""
    return next(
        (
            p.partition_error_code
            for t in answer.results_by_topic_v3_and_below
            for p in t.results_by_partition
            if p.partition_error_code
        ),
        0,
    )


def _offsets_error(answer: Any) -> int:
    """The first partition error of a TxnOffsetCommit answer."""
    return next((p.error_code for t in answer.topics for p in t.partitions if p.error_code), 0)


def end_txn(
    coordinators: Coordinators,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
) -> None:
    """EndTxn v3: commit or abort the open transaction of ``transactional_id`` at
    ``producer_id``/``producer_epoch``, from any process (no other state is needed).

    Idempotent as Kafka's coordinator makes it: ending a transaction again with the same
    result answers NONE (state CompleteCommit / CompleteAbort; PrepareCommit /
    PrepareAbort answer CONCURRENT_TRANSACTIONS, retried). Raises ProducerFencedError
    when a newer epoch exists (a later InitProducerId aborted the transaction, or it timed
    out), InvalidTxnStateError for the other result of a completed transaction,
    InvalidProducerIdMappingError for an unknown transactional id / producer id."""
    req = EndTxnRequest[3](
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        committed=commit,
    )
    coordinators.coordinator_call(
        transactional_id,
        TRANSACTION,
        req,
        lambda r: r.error_code,
        f"EndTxn({'commit' if commit else 'abort'}) {transactional_id!r}",
    )


def committed_offsets(coordinators: Coordinators, group: str) -> dict[tuple[str, int], int]:
    """Every committed offset of ``group`` (OffsetFetch v7, all topics, ``require_stable``:
    while a transaction holding offsets of the group is open the coordinator answers
    UNSTABLE_OFFSET_COMMIT, retried). Partitions without an offset are left out."""
    req = OffsetFetchRequest[7](group_id=group, topics=None, require_stable=True)

    def error(answer: Any) -> int:
        return int(answer.error_code) or next(
            (p.error_code for t in answer.topics for p in t.partitions if p.error_code), 0
        )

    answer = coordinators.coordinator_call(group, GROUP, req, error, f"OffsetFetch {group!r}")
    return {
        (t.name, p.partition_index): int(p.committed_offset)
        for t in answer.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


_STAMP = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence (bytes 43-56)
_ATTRS = struct.Struct(">h")
_CRC = struct.Struct(">I")
_RECORDS = struct.Struct(">i")
ATTR_TRANSACTIONAL = 0x10
"""Record batch attributes bit 4 (Kafka's DefaultRecordBatch)."""


def stamp_batch(buf: bytearray | memoryview, txn: Transaction, topic: str, partition: int) -> None:
    """Make the record batch v2 ``buf`` (one whole batch, writable) a batch of ``txn``:
    isTransactional, its producer id and epoch, the partition's next base sequence, and
    the CRC-32C of bytes [21, end) recomputed."""
    view = memoryview(buf)
    records = _RECORDS.unpack_from(view, 57)[0]
    (attributes,) = _ATTRS.unpack_from(view, 21)
    _ATTRS.pack_into(view, 21, attributes | ATTR_TRANSACTIONAL)
    sequence = txn.next_sequence(topic, partition, records)
    _STAMP.pack_into(view, 43, txn.producer_id, txn.producer_epoch, sequence)
    _CRC.pack_into(view, 17, crc32c.crc32c(view[21:]))
