"""Helpers of the share-group tests: topics, the ``share.auto.offset.reset`` group config,
share consumers (confluent-kafka's ``ShareConsumer``), one in a subprocess to kill, and raw
KIP-932 requests over :class:`~tests.broker._wire.Wire`."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from tests._wait import wait_until
from tests.broker._wire import Wire

from seglog.broker.protocol.messages.share_group import (
    DescribeShareGroupOffsetsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)

Offsets = set[tuple[int, int]]
"""(partition, offset) pairs."""


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def earliest(bootstrap: str, group: str) -> None:
    """Set the group config ``share.auto.offset.reset=earliest`` (IncrementalAlterConfigs
    on the GROUP resource), so records produced before the group first fetches count."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, count: int, *, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str, **conf: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def poll_once(consumer: ShareConsumer, into: list[Any], timeout: float = 0.5) -> list[Any]:
    """One poll; its records (errors fail the test) are added to ``into`` and returned."""
    got = []
    for m in consumer.poll(timeout):
        assert m.error() is None, m.error()
        got.append(m)
    into.extend(got)
    return got


def offsets(messages: Iterable[Any]) -> list[tuple[int, int]]:
    return sorted((m.partition(), m.offset()) for m in messages)


KEEP_SCRIPT = """
import sys, time
from confluent_kafka import ShareConsumer, AcknowledgeType
bootstrap, group, topic = sys.argv[1:4]
want, accept = int(sys.argv[4]), int(sys.argv[5])
c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([topic])
got = []
while len(got) < want:
    for m in c.poll(0.5):
        if m.error() is None:
            got.append(m)
for m in got:
    if m.offset() < accept:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
c.commit_sync(30)
print(" ".join(str(m.offset()) for m in got), flush=True)
time.sleep(3600)
"""
"""A share consumer that acquires ``want`` records, accepts those below offset ``accept``
(commit_sync: confirmed by the broker), prints the offsets it got and keeps the rest
acquired until it is killed."""


def start_keeper(
    bootstrap: str, group: str, topic: str, *, want: int, accept: int = 0
) -> tuple[subprocess.Popen[str], list[int]]:
    """Run :data:`KEEP_SCRIPT`; returns the process and the offsets it acquired."""
    proc = subprocess.Popen(
        [sys.executable, "-c", KEEP_SCRIPT, bootstrap, group, topic, str(want), str(accept)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until it printed (or died: empty line)
    assert line.strip(), f"the share consumer exited with {proc.wait()}"
    return proc, [int(x) for x in line.split()]


# -- raw requests ----------------------------------------------------------------------


def heartbeat(w: Wire, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return w.call(
        ShareGroupHeartbeatRequest[1](
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=topics,
        )
    )


def _ack_batches(req: Any, acks: list[tuple[int, int, list[int]]]) -> list[Any]:
    return [
        req.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=types)
        for a, b, types in acks
    ]


def share_fetch(
    w: Wire,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID | None,
    *,
    acks: list[tuple[int, int, list[int]]] | None = None,
    max_records: int = 500,
    max_wait_ms: int = 5000,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> Any:
    req = ShareFetchRequest[1]
    topics = []
    if topic_id is not None:
        part = req.FetchTopic.FetchPartition
        topics = [
            req.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    part(partition_index=0, acknowledgement_batches=_ack_batches(part, acks or []))
                ],
            )
        ]
    return w.call(
        req(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            max_records=max_records,
            batch_size=max_records,
            topics=topics,
            forgotten_topics_data=[],
        )
    )


def share_ack(
    w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID,
    acks: list[tuple[int, int, list[int]]],
) -> Any:  # fmt: skip
    req = ShareAcknowledgeRequest[1]
    part = req.AcknowledgeTopic.AcknowledgePartition
    return w.call(
        req(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            topics=[
                req.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=[
                        part(partition_index=0, acknowledgement_batches=_ack_batches(part, acks))
                    ],
                )
            ],
        )
    )


def start_offset(bootstrap: str, group: str, topic: str, partition: int = 0) -> int:
    """The share-partition start offset (DescribeShareGroupOffsets; -1: no state)."""
    req = DescribeShareGroupOffsetsRequest[0]
    group_req = req.DescribeShareGroupOffsetsRequestGroup
    with Wire(bootstrap) as w:
        resp = w.call(
            req(
                groups=[
                    group_req(
                        group_id=group,
                        topics=[
                            group_req.DescribeShareGroupOffsetsRequestTopic(
                                topic_name=topic, partitions=[partition]
                            )
                        ],
                    )
                ]
            )
        )
    g = resp.groups[0]
    if g.error_code:
        return -1000 - int(g.error_code)  # shows in an assertion message
    part = g.topics[0].partitions[0]
    assert part.error_code == 0, part
    return int(part.start_offset)


def wait_start_offset(bootstrap: str, group: str, topic: str, expected: int) -> None:
    wait_until(
        lambda: start_offset(bootstrap, group, topic) == expected,
        message=lambda: f"start offset {start_offset(bootstrap, group, topic)} != {expected}",
    )
