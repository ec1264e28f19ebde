"""KIP-932 share groups with confluent-kafka's ``ShareConsumer`` against a real ``seglog
serve``: implicit and explicit acknowledgement, three consumers sharing one partition,
RELEASE / REJECT, the delivery-count limit, a killed consumer's records delivered to
another once their lock expires, and a broker kill -9 losing no acknowledgement."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType
from tests._wait import wait_until
from tests.broker._share import (
    create_topic,
    earliest,
    offsets,
    poll_once,
    produce,
    share_consumer,
    start_keeper,
    start_offset,
    wait_start_offset,
)
from tests.broker._wire import Wire

from seglog.broker import BrokerProcess, start_broker
from seglog.broker.protocol.messages.share_group import ShareGroupDescribeRequest

SHORT_LOCK = ["--group-share-record-lock-duration-ms", "1000"]


def _collect(
    consumer: Any,
    count: int,
    into: list[Any] | None = None,
    ack: Callable[[Any], Any] | None = None,
    timeout: float = 30.0,
) -> list[Any]:
    """Poll until ``count`` records came; in explicit mode ``ack(message)`` gives each
    record's acknowledge type as it comes (every record of a poll is acknowledged before
    the next poll, as the explicit mode requires)."""
    got: list[Any] = [] if into is None else into

    def step() -> bool:
        for m in poll_once(consumer, got):
            if ack is not None:
                consumer.acknowledge(m, ack(m))
        return len(got) >= count

    wait_until(step, timeout, interval=0, message=lambda: f"{len(got)} of {count}: {offsets(got)}")
    return got


def test_implicit_acknowledgement_accepts_each_poll(broker: str, topic: str) -> None:
    create_topic(broker, topic)
    earliest(broker, "share-implicit")
    produce(broker, topic, 20)
    consumer = share_consumer(broker, "share-implicit", topic)
    try:
        got = _collect(consumer, 20)
        assert offsets(got) == [(0, o) for o in range(20)]
        assert {m.delivery_count() for m in got} == {1}
        assert [m.value() for m in sorted(got, key=lambda m: m.offset())] == [
            b"v%d" % i for i in range(20)
        ]
        consumer.commit_sync(30)  # implicit mode: the last poll's records become ACCEPT
    finally:
        consumer.close()
    wait_start_offset(broker, "share-implicit", topic, 20)  # every record accepted


def test_latest_is_the_default_reset(broker: str, topic: str) -> None:
    create_topic(broker, topic)
    produce(broker, topic, 5)  # before the group exists: not delivered (latest)
    consumer = share_consumer(broker, "share-latest", topic)
    try:
        got: list[Any] = []

        # the share partition is created by the group's first fetch, at the log end (5)
        def initialised() -> bool:
            poll_once(consumer, got)  # the group's first fetch creates the share partition
            return start_offset(broker, "share-latest", topic) == 5

        wait_until(initialised)
        produce(broker, topic, 3)
        _collect(consumer, 3, got)
        assert offsets(got) == [(0, 5), (0, 6), (0, 7)]
    finally:
        consumer.close()


def test_explicit_release_and_reject(broker: str, topic: str) -> None:
    group = "share-explicit"
    create_topic(broker, topic)
    earliest(broker, group)
    produce(broker, topic, 6)
    consumer = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        accept, release, reject = (
            AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT
        )  # fmt: skip
        kinds = {0: accept, 1: release, 2: reject, 3: release, 4: accept, 5: reject}
        first = _collect(consumer, 6, ack=lambda m: kinds[m.offset()])
        assert offsets(first) == [(0, o) for o in range(6)]
        consumer.commit_sync(30)
        # the released records (1, 3) come back at once (not after the 30 s lock), counted;
        # rejected ones (2, 5) never do
        again = _collect(consumer, 2, ack=lambda _m: accept, timeout=10)
        assert offsets(again) == [(0, 1), (0, 3)]
        assert {m.delivery_count() for m in again} == {2}
        consumer.commit_sync(30)
    finally:
        consumer.close()
    wait_start_offset(broker, group, topic, 6)  # 0-5 settled: accepted or archived


def test_delivery_count_limit_archives(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(["--group-share-delivery-count-limit", "2"])
    bootstrap, topic, group = proc.bootstrap, "limited", "share-limit"
    create_topic(bootstrap, topic)
    earliest(bootstrap, group)
    produce(bootstrap, topic, 2)
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        seen: list[Any] = []
        for delivery in (1, 2):
            got = _collect(consumer, 2, [], ack=lambda _m: AcknowledgeType.RELEASE)
            seen += got
            assert [m.delivery_count() for m in got] == [delivery, delivery]
            consumer.commit_sync(30)

        # delivered twice: archived on release; the share partition moves past both
        def archived() -> bool:
            poll_once(consumer, seen, 0.2)  # the fetch that finds them due archives them
            return start_offset(bootstrap, group, topic) == 2

        wait_until(archived, message=lambda: f"seen {offsets(seen)}")
        assert max(m.delivery_count() for m in seen) == 2
    finally:
        consumer.close()


def test_three_consumers_share_one_partition(broker: str, topic: str) -> None:
    group, total = "share-three", 300
    create_topic(broker, topic)
    earliest(broker, group)
    consumers = [share_consumer(broker, group, topic) for _ in range(3)]
    got: list[list[Any]] = [[], [], []]
    done = threading.Event()
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            while not done.is_set():
                poll_once(consumers[i], got[i], 0.2)
            consumers[i].commit_sync(30)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(30):  # in small waves, so that every consumer has a chance
            produce(broker, topic, 10)
        wait_until(lambda: sum(len(g) for g in got) >= total or errors, timeout=60)
    finally:
        done.set()
        for t in threads:
            t.join(60)
        for c in consumers:
            c.close()
    assert errors == []
    every = [o for g in got for o in offsets(g)]
    assert sorted(every) == [(0, o) for o in range(total)]  # none lost, none twice
    assert sum(1 for g in got if g) >= 2, [len(g) for g in got]  # shared, not one reader
    wait_start_offset(broker, group, topic, total)  # each accepted once


def test_partitions_spread_over_members(broker: str, topic: str) -> None:
    """Fewer members than partitions: the simple assignor gives each partition to one
    member (partition j to member j mod 2 by member id); every record is read once."""
    group = "share-spread"
    create_topic(broker, topic, partitions=3)
    earliest(broker, group)
    for p in range(3):
        produce(broker, topic, 10, partition=p)
    consumers = [share_consumer(broker, group, topic) for _ in range(2)]
    got: list[list[Any]] = [[], []]
    try:
        wait_until(
            lambda: (
                [poll_once(c, g, 0.2) for c, g in zip(consumers, got, strict=True)]
                and sum(map(len, got)) >= 30
            ),
            message=lambda: f"{[offsets(g) for g in got]}",
        )
        with Wire(broker) as w:
            desc = w.call(
                ShareGroupDescribeRequest[1](group_ids=[group], include_authorized_operations=False)
            )
        members = desc.groups[0].members
        assigned = sorted(
            sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
            for m in members
        )
        assert assigned == [[0, 2], [1]]
        for c in consumers:
            c.commit_sync(30)
    finally:
        for c in consumers:
            c.close()
    every = sorted(o for g in got for o in offsets(g))
    assert every == [(p, o) for p in range(3) for o in range(10)]  # each record once
    # each consumer read only partitions assigned to it (none read by both)
    assert not {p for p, _ in offsets(got[0])} & {p for p, _ in offsets(got[1])}


def test_killed_consumer_records_go_to_another(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory(SHORT_LOCK)
    bootstrap, topic, group = proc.bootstrap, "locked", "share-kill"
    create_topic(bootstrap, topic)
    earliest(bootstrap, group)
    produce(bootstrap, topic, 5)
    keeper, held = start_keeper(bootstrap, group, topic, want=5)
    assert held == [0, 1, 2, 3, 4]
    keeper.send_signal(signal.SIGKILL)
    keeper.wait()
    consumer = share_consumer(bootstrap, group, topic)
    try:
        got = _collect(consumer, 5)  # once the 1 s locks expire
        assert offsets(got) == [(0, o) for o in range(5)]
        assert {m.delivery_count() for m in got} == {2}
        consumer.commit_sync(30)
    finally:
        consumer.close()


def test_broker_kill9_loses_no_acknowledgement(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = start_broker(data)
    topic, group = "durable", "share-durable"
    try:
        create_topic(proc.bootstrap, topic)
        earliest(proc.bootstrap, group)
        produce(proc.bootstrap, topic, 10)
        # 0-5 accepted (confirmed by the broker), 6-9 acquired and never acknowledged
        keeper, held = start_keeper(proc.bootstrap, group, topic, want=10, accept=6)
        assert held == list(range(10))
        proc.stop(signal.SIGKILL)
        keeper.send_signal(signal.SIGKILL)
        keeper.wait()
        proc = start_broker(data, port=proc.port)
        consumer = share_consumer(proc.bootstrap, group, topic)
        try:
            got = _collect(consumer, 4)
            consumer.commit_sync(30)
            assert offsets(got) == [(0, o) for o in range(6, 10)]  # never 0-5 again
            assert {m.delivery_count() for m in got} == {2}
        finally:
            consumer.close()
        wait_start_offset(proc.bootstrap, group, topic, 10)
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert " ERROR " not in proc.log_text(), proc.log_text()
