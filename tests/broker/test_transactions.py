"""Kafka transactions with the three Python clients' transactional producers and
read_committed consumers (confluent-kafka, kafka-python, aiokafka): commit, abort, an empty
transaction, offsets sent to the transaction, zombie fencing, a hung transaction aborted by
its timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KafkaPythonError
from kafka.protocol.admin import DescribeTransactionsRequest
from tests._wait import wait_until

from seglog.broker import BrokerProcess

from ._txn import add, init
from ._wire import Wire, ensure_topic

BROKER_ARGS = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "100")


def read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 20.0) -> list[bytes]:
    """Every value a read_committed confluent-kafka consumer gets from the topic, read
    until the partition's end (the last stable offset) and at least ``expected`` values."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"rc-{topic}-{time.monotonic_ns()}",
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "enable.partition.eof": True, "enable.auto.commit": False,
    })  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    eof = False

    def step() -> bool:
        nonlocal eof
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
        elif m is not None and m.error().code() == KafkaError._PARTITION_EOF:
            eof = True
        return eof and len(got) >= expected

    try:
        wait_until(step, timeout=timeout, interval=0, message=lambda: f"read {got}")
    finally:
        c.close()
    return got


def confluent_producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **conf})
    p.init_transactions(20)
    return p


def test_confluent_commit_abort_empty(broker: str, topic: str) -> None:
    p = confluent_producer(broker, "cf-1")
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"c%d" % i, partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"a%d" % i, partition=0)
    p.flush(20)
    p.abort_transaction(20)
    p.begin_transaction()  # empty: nothing sent, nothing stored
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=0)
    p.commit_transaction(20)
    got = read_committed(broker, topic, 6)
    assert got == [b"c0", b"c1", b"c2", b"c3", b"c4", b"last"]


def test_confluent_send_offsets_to_transaction(broker: str, topic: str) -> None:
    """Offsets sent to a transaction are the group's only once it commits."""
    group = f"g-{topic}"
    conf = {"bootstrap.servers": broker, "group.id": group}
    consumer = Consumer({**conf, "isolation.level": "read_uncommitted"})
    stable = Consumer(conf)  # read_committed: asks with require_stable
    p = confluent_producer(broker, "cf-offsets")
    meta = consumer.consumer_group_metadata()

    def committed() -> int:
        return int(consumer.committed([TopicPartition(topic, 0)], 10)[0].offset)

    p.begin_transaction()
    p.produce(topic, value=b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 10)], meta, 20)
    assert committed() < 0  # pending
    with pytest.raises(KafkaException):  # 88 UNSTABLE_OFFSET_COMMIT, retried until then
        stable.committed([TopicPartition(topic, 0)], 2)
    p.abort_transaction(20)
    assert committed() < 0
    p.begin_transaction()
    p.produce(topic, value=b"y", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], meta, 20)
    p.commit_transaction(20)
    assert committed() == 11
    assert stable.committed([TopicPartition(topic, 0)], 10)[0].offset == 11
    consumer.close()
    stable.close()
    assert read_committed(broker, topic, 1) == [b"y"]


def test_confluent_zombie_fenced(broker: str, topic: str) -> None:
    """A second producer with the same transactional id fences the first: the zombie's
    open transaction is aborted and its commit fails as fenced."""
    zombie = confluent_producer(broker, "cf-zombie")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(20)
    fresh = confluent_producer(broker, "cf-zombie")
    with pytest.raises(KafkaException) as failed:
        zombie.commit_transaction(20)
    assert failed.value.args[0].fatal()
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(20)
    assert read_committed(broker, topic, 1) == [b"fresh"]


def test_confluent_timeout_aborts(broker: str, topic: str) -> None:
    """A transaction left open past transaction.timeout.ms is aborted by the coordinator
    (epoch bumped: its producer is fenced); read_committed readers never see it and are
    not held back by it."""
    p = confluent_producer(broker, "cf-timeout", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, value=b"hung", partition=0)
    p.flush(20)
    other = confluent_producer(broker, "cf-timeout-other")
    other.begin_transaction()
    other.produce(topic, value=b"after", partition=0)
    other.commit_transaction(20)
    assert read_committed(broker, topic, 1) == [b"after"]  # once the hung one is aborted
    with pytest.raises(KafkaException):
        p.commit_transaction(20)


def test_kafka_python_transactions(broker: str, topic: str) -> None:
    group = f"kp-{topic}"
    p = KafkaProducer(bootstrap_servers=broker, transactional_id="kp-1")
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"c1", partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.send(topic, b"a1", partition=0)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.commit_transaction()  # empty
    p.begin_transaction()
    p.send(topic, b"c2", partition=0)
    offsets = {KpTopicPartition(topic, 0): OffsetAndMetadata(5, "", -1)}
    p.send_offsets_to_transaction(offsets, group)
    p.commit_transaction()
    zombie_free = KafkaProducer(bootstrap_servers=broker, transactional_id="kp-1")
    zombie_free.init_transactions()  # fences p
    p.begin_transaction()
    p.send(topic, b"zombie", partition=0)
    # fenced at AddPartitionsToTxn (then every transactional call fails with it) or at EndTxn
    with pytest.raises(KafkaPythonError, match="ProducerFenced"):
        p.commit_transaction()
    p.close(timeout=5)
    zombie_free.close()
    c = KafkaConsumer(
        bootstrap_servers=broker, isolation_level="read_committed",
        auto_offset_reset="earliest", consumer_timeout_ms=3000, group_id=group,
        enable_auto_commit=False,
    )  # fmt: skip
    c.assign([KpTopicPartition(topic, 0)])
    assert c.committed(KpTopicPartition(topic, 0)) == 5
    c.seek(KpTopicPartition(topic, 0), 0)
    assert [m.value for m in c] == [b"c1", b"c2"]
    c.close()


def test_aiokafka_transactions(broker: str, topic: str) -> None:
    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=broker, transactional_id="aio-1")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"x1", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aborted", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"x2", partition=0)
                await p.send_offsets_to_transaction({AioTopicPartition(topic, 0): 3}, "aio-g")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(
            bootstrap_servers=broker, isolation_level="read_committed",
            auto_offset_reset="earliest", group_id="aio-g", enable_auto_commit=False,
        )  # fmt: skip
        await c.start()
        try:
            tp = AioTopicPartition(topic, 0)
            c.assign([tp])
            assert await c.committed(tp) == 3
            c.seek(tp, 0)
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 2 and time.monotonic() < deadline:
                for messages in (await c.getmany(timeout_ms=500)).values():
                    got += [m.value for m in messages]
            more = await c.getmany(timeout_ms=300)
            got += [m.value for ms in more.values() for m in ms]
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == [b"x1", b"x2"]


def test_transactional_id_expiration(broker_factory: Callable[..., BrokerProcess]) -> None:
    """An id with no transaction for transactional.id.expiration.ms is forgotten
    (DescribeTransactions: 105), also across a restart; one in a transaction is kept."""
    args = [*BROKER_ARGS, "--transactional-id-expiration-ms", "500"]
    proc = broker_factory(args)
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, "expiring")
        idle = init(w, "idle-id", timeout_ms=60_000)
        busy = init(w, "busy-id", timeout_ms=60_000)
        assert add(w, "busy-id", busy.producer_id, busy.producer_epoch, "expiring") == 0

        def state(txn_id: str) -> Any:
            return w.call(DescribeTransactionsRequest[0](transactional_ids=[txn_id]))

        wait_until(
            lambda: state("idle-id").transaction_states[0].error_code == 105,
            timeout=20, message="idle-id did not expire",
        )  # fmt: skip
        assert state("busy-id").transaction_states[0].transaction_state == "Ongoing"
        assert idle.error_code == 0
    assert proc.stop() == 0
    proc = broker_factory(args, data=proc.data_dir)
    with Wire(proc.bootstrap) as w:
        gone = w.call(DescribeTransactionsRequest[0](transactional_ids=["idle-id", "busy-id"]))
        assert [t.error_code for t in gone.transaction_states] == [105, 0]
