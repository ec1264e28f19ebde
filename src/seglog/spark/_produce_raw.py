"""Wire-mode writes that send record batches whole: the sink's rows encoded column-wise into
record batches v2 and sent with Kafka Produce requests, no client object per record.

confluent-kafka's ``produce()`` takes one Python call per record (~0.45 µs of CPU each, and
librdkafka then re-encodes them): the sink reached 0.25x of the no-op Arrow sink that way.
Here the rows of each Arrow batch are routed as ``_encode.Router`` routes them (murmur2 of
the key, the Java client's partitioner; null keys round robin), encoded by storage's
vectorised encoder (``build_batches``), and each record batch (at most ``BATCH_BYTES``) is
sent to its partition's leader: ProduceRequest v8 (Kafka >= 2.4; kafka-python's schemas),
``acks=-1`` (all in-sync replicas, what ``acks=all`` asks), one batch per partition per
request as Kafka >= 3 requires, up to ``IN_FLIGHT`` requests in flight per connection
(responses come back in order on a connection). Connections and security are the broker's
wire client, as the raw reader's (``seglog.broker.KafkaConnection``: TLS, SASL PLAIN /
SCRAM; ``_fetch.raw_security``). At-least-once like Spark's Kafka sink: a
retried task produces its rows again. A partition error fails the task with the error
(``kafka.errors`` class) after ``RETRIES`` tries of a retriable one.

In a transaction (``txn``, the exactly-once sink: ``_exactly_once``) each partition is
added to the transaction before its first batch (AddPartitionsToTxn), each batch is
stamped transactional with the producer id, epoch and the partition's next sequence
(``_txn.stamp_batch``), the requests carry the transactional id, and any partition error
fails the task at once: a resent batch could not keep its sequence order behind the
ones in flight, and Spark's retry of the task fences and aborts the transaction anyway.

Used when the ``kafka.*`` options are all ones the raw client honours
(``_fetch.raw_fetch_applies``) and no compression is asked; otherwise ``_produce`` (with
confluent-kafka) serves every librdkafka option.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from kafka.errors import UnknownTopicOrPartitionError, for_code
from kafka.protocol.producer import ProduceRequest

from seglog.broker import KafkaConnection, split_host_port
from seglog.spark._encode import (
    BATCH_BYTES,
    Gathered,
    Pending,
    Router,
    key_columns,
    records_of,
    split_columns,
)
from seglog.spark._fetch import raw_security, whole_batches
from seglog.spark._txn import Transaction, stamp_batch

__all__ = ["IN_FLIGHT", "RawProducer", "produce_raw"]

IN_FLIGHT = 5
"""Produce requests sent before the first answer is awaited (librdkafka's and the Java
client's ``max.in.flight.requests.per.connection`` default)."""

RETRIES = 5
"""Tries of a batch whose partition answers a retriable error (then the task fails)."""

GATHER_BYTES = 4 * BATCH_BYTES
"""Value bytes gathered for one partition before they are encoded and sent."""

TIMEOUT_MS = 30_000
"""``timeout_ms`` of each Produce request (the Java client's ``request.timeout.ms``)."""


class RawProducer:
    """Produce record batches to the partitions of one topic through their leaders.

    Raises ``UnknownTopicOrPartitionError`` (and other ``kafka.errors`` classes) for a
    topic the broker does not have or refuses, ConnectionError / OSError when no broker
    answers, SaslAuthenticationFailedError on a refused login."""

    _txn: Transaction | None = None
    """The transaction the batches are written in (None: not transactional)."""

    def __init__(
        self,
        kafka: Mapping[str, str],
        topic: str,
        timeout_s: float = 30,
        txn: Transaction | None = None,
    ) -> None:
        self.topic = topic
        self._txn = txn
        self._client_id = kafka.get("client.id", "seglog-spark")
        self._security = raw_security(kafka)
        self._timeout_s = timeout_s
        first = split_host_port(kafka["bootstrap.servers"].split(",")[0])
        conn = KafkaConnection(*first, self._client_id, timeout_s, self._security)
        try:
            meta, found = self._metadata(conn, topic, time.monotonic() + timeout_s)
        except BaseException:
            conn.close()
            raise
        brokers = {b.node_id: (b.host, int(b.port)) for b in meta.brokers}
        self.leaders = {p.partition_index: brokers.get(p.leader_id) for p in found.partitions}
        self.partitions = len(self.leaders)
        self._conns: dict[tuple[str, int], KafkaConnection] = {first: conn}
        self._waiting: dict[tuple[str, int], deque[tuple[int, Any, int]]] = {}
        self._spare: list[bytearray] = []
        """Buffers of answered ``send_copy`` batches, to copy the next ones into (fresh
        ones per batch, then the joins of ``encode_columns``, cost page faults and
        copies: measured standalone, 2 tasks x 0.5 M rows to a seglog serve, sender CPU
        per task 0.076-0.094 -> 0.063-0.089 s)."""

    @staticmethod
    def _metadata(conn: KafkaConnection, topic: str, deadline: float) -> tuple[Any, Any]:
        """Metadata v8 of ``topic``, asking the broker to create it if missing (as Kafka
        producers do: ``auto.create.topics.enable`` decides); retried while the answer
        is a retriable error (a topic just created has no leader yet) until ``deadline``."""
        tries = 0
        while True:
            meta = conn.topic_metadata(topic, auto_create=True)
            found = [t for t in meta.topics if t.name == topic]
            code = found[0].error_code if found else 3
            code = code or next((p.error_code for p in found[0].partitions if p.error_code), 0)
            if not code and found[0].partitions:
                return meta, found[0]
            error = for_code(code) if code else UnknownTopicOrPartitionError
            tries += 1
            if not error.retriable or time.monotonic() >= deadline:
                raise error(f"seglog sink: Metadata of topic {topic}")
            time.sleep(min(0.05 * tries, 0.5))

    def _conn(self, address: tuple[str, int]) -> KafkaConnection:
        conn = self._conns.get(address)
        if conn is None:
            conn = KafkaConnection(*address, self._client_id, self._timeout_s, self._security)
            self._conns[address] = conn
        return conn

    def send_copy(self, partition: int, batch: memoryview | bytes) -> None:
        """``send`` a copy of ``batch``: the caller may reuse its buffer at once. The copy
        is made in a buffer kept for the retries and reused once the batch is answered
        (``_spare``), so a task sends from a few warm buffers."""
        size = len(batch)
        spare = self._spare.pop() if self._spare else bytearray()
        if len(spare) < size:
            spare = bytearray(size)
        spare[:size] = batch
        if self._txn is not None:
            self._txn.add_partition(self.topic, partition)
            stamp_batch(memoryview(spare)[:size], self._txn, self.topic, partition)
        self.send(partition, memoryview(spare)[:size])

    def send(self, partition: int, batch: memoryview | bytes) -> None:
        """Send one record batch v2 to ``partition`` (its answer is checked later, by a
        later ``send`` once ``IN_FLIGHT`` are pending, or by ``flush``)."""
        address = self.leaders.get(partition)
        if address is None:
            raise UnknownTopicOrPartitionError(f"seglog sink: {self.topic}-{partition}")
        waiting = self._waiting.setdefault(address, deque())
        while len(waiting) >= IN_FLIGHT:
            self._settle(address, waiting)
        conn = self._conn(address)
        waiting.append((partition, batch, conn.send(self._request(partition), batch)))

    def _request(self, partition: int) -> Any:
        """The Produce request of one batch to ``partition``, its records left empty:
        ``KafkaConnection.send`` splices the batch in (kafka-python's encoder copied each
        batch three times: measured with the bench sink, 1 M rows, wire: Python CPU
        0.37-0.43 -> 0.35-0.37 CPU-s per 1 M rows)."""
        req = ProduceRequest[8]
        data = req.TopicProduceData.PartitionProduceData(index=partition, records=b"")
        return req(
            transactional_id=None if self._txn is None else self._txn.transactional_id,
            acks=-1,
            timeout_ms=TIMEOUT_MS,
            topic_data=[req.TopicProduceData(name=self.topic, partition_data=[data])],
        )

    def _settle(self, address: tuple[str, int], waiting: deque[tuple[int, Any, int]]) -> None:
        """Read the oldest pending answer on ``address``; a retriable error: the answers
        to the later sends first, then the batch again (as a client without idempotence
        retries, this may reorder it after them)."""
        partition, batch, _ = waiting.popleft()
        conn = self._conns[address]
        answer = conn.receive().responses[0].partition_responses[0]
        tries = 1
        while answer.error_code:
            error = for_code(answer.error_code)
            if not error.retriable or tries >= RETRIES or self._txn is not None:
                message = getattr(answer, "error_message", None)
                raise error(
                    f"seglog sink: Produce to {self.topic}-{partition} failed"
                    + (f": {message}" if message else "")
                )
            while waiting:
                self._settle(address, waiting)
            time.sleep(0.1 * tries)  # backoff: the broker is busy or its leader moving
            conn.send(self._request(partition), batch)
            answer = conn.receive().responses[0].partition_responses[0]
            tries += 1
        if isinstance(batch, memoryview) and isinstance(batch.obj, bytearray):  # send_copy's
            spare = batch.obj
            batch.release()
            if len(self._spare) < IN_FLIGHT + 1:
                self._spare.append(spare)

    def flush(self) -> None:
        """Wait for every pending answer; raises as ``send``."""
        for address, waiting in self._waiting.items():
            while waiting:
                self._settle(address, waiting)

    def close(self) -> None:
        """Close the connections (pending sends are not awaited)."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def _grouped(batch: pa.RecordBatch, default_topic: str | None, router: Router
             ) -> Iterator[tuple[str, int, tuple[pa.Array, pa.Array] | Pending]]:  # fmt: skip
    """The rows of one Arrow batch as ``(topic, partition, rows)``: key/value columns (Arrow
    arrays) when the batch has only those, else records."""
    columns = key_columns(batch) if default_topic else None
    if columns is not None and default_topic:
        keys, values = columns
        for part, part_keys, part_values in split_columns(
            keys, values, router.partitions(default_topic, keys)
        ):
            yield default_topic, part, (part_keys, part_values)
        return
    groups: dict[tuple[str, int], Pending] = {}
    for record in records_of(batch):
        topic = record.topic or default_topic
        if not topic:
            raise ValueError("no topic: set option topic or give the DataFrame a topic column")
        groups.setdefault((topic, router.partition(topic, record)), Pending()).add(record)
    for (topic, part), pending in groups.items():
        yield topic, part, pending


def _send_copies(target: RawProducer, part: int, data: bytes | bytearray | memoryview) -> None:
    """``send_copy`` each record batch of ``data`` (one or more whole batches)."""
    for one in whole_batches(data)[0]:
        target.send_copy(part, one)


def produce_raw(
    batches: Iterator[pa.RecordBatch],
    kafka: Mapping[str, str],
    default_topic: str | None,
    txn: Transaction | None = None,
) -> int:
    """Produce every row of ``batches`` (see the module doc), in transaction ``txn`` if
    given (its producer id initialised); returns the record count. Raises ValueError for
    a row without a topic or a partition column naming one the topic lacks,
    ``kafka.errors`` classes for refused topics or produce errors."""
    producers: dict[str, RawProducer] = {}

    def producer(topic: str) -> RawProducer:
        found = producers.get(topic)
        if found is None:
            found = producers[topic] = RawProducer(kafka, topic, txn=txn)
        return found

    router = Router(lambda topic: producer(topic).partitions)
    count = 0
    # rows gathered per partition across input batches (Spark hands ~10 k rows at a
    # time) until they fill whole record batches: fewer, fuller Produce requests
    gathered: dict[tuple[str, int], Gathered] = {}

    arena = bytearray()  # where each batch is built (Gathered.take), then copied out

    def send(topic: str, part: int, rows: Gathered) -> int:
        target = producer(topic)
        sent = 0
        for data, n in rows.take(arena):
            _send_copies(target, part, data)
            del data  # a view of the arena: it could not grow for the next batch
            sent += n
        return sent

    try:
        for batch in batches:
            for topic, part, rows in _grouped(batch, default_topic, router):
                held = gathered.get((topic, part))
                if held is None:
                    held = gathered[(topic, part)] = Gathered(0)
                if isinstance(rows, Pending):
                    held.pending.extend(rows)
                    held.size += sum(map(len, filter(None, rows.values)))
                else:
                    held.add_columns(*rows)
                if held.size >= GATHER_BYTES:
                    count += send(topic, part, held)
        for (topic, part), held in gathered.items():
            if held:
                count += send(topic, part, held)
        for target in producers.values():
            target.flush()
    finally:
        for target in producers.values():
            target.close()
    return count
