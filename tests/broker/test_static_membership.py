"""Static membership (KIP-345, ``group.instance.id``) with confluent-kafka: a static member
that restarts within its session takes its old place (same partitions) without a
rebalance of the others; its old member id is fenced."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import HeartbeatRequest
from tests._wait import wait_until

from ._wire import Wire


def _member(broker: str, group: str, instance: str, events: list[str]) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": group,
            "group.instance.id": instance,
            "session.timeout.ms": 30000,
            "heartbeat.interval.ms": 500,
        }
    )

    def assigned(_c: Any, parts: list[TopicPartition]) -> None:
        events.append(f"assign {sorted(p.partition for p in parts)}")

    def revoked(_c: Any, parts: list[TopicPartition]) -> None:
        events.append(f"revoke {sorted(p.partition for p in parts)}")

    consumer.subscribe(["static"], on_assign=assigned, on_revoke=revoked)
    return consumer


def _poll_until(consumers: list[Consumer], done: Any, timeout: float = 30) -> None:
    def poll_once() -> bool:
        for c in consumers:
            c.poll(0.1)
        return bool(done())

    wait_until(poll_once, timeout, interval=0, message="condition not reached")


def test_static_member_restart_keeps_assignment_without_rebalance(broker: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic("static", 4)])["static"].result(15)
    group = "static-group"
    ev1: list[str] = []
    ev2: list[str] = []
    c1 = _member(broker, group, "instance-1", ev1)
    c2 = _member(broker, group, "instance-2", ev2)
    _poll_until(
        [c1, c2],
        lambda: (
            len(c1.assignment()) + len(c2.assignment()) == 4 and c1.assignment() and c2.assignment()
        ),
    )
    before = {p.partition for p in c1.assignment()}
    desc = admin.describe_consumer_groups([group])[group].result(15)
    old_ids = {m.group_instance_id: m.member_id for m in desc.members}
    ev2.clear()

    c1.close()  # a static member does not leave the group on close
    c1b = _member(broker, group, "instance-1", ev1)
    _poll_until([c1b, c2], lambda: bool(c1b.assignment()))
    assert {p.partition for p in c1b.assignment()} == before  # its old partitions
    for _ in range(10):  # the other member saw no rebalance
        c2.poll(0.1)
    assert ev2 == []
    desc = admin.describe_consumer_groups([group])[group].result(15)
    new_ids = {m.group_instance_id: m.member_id for m in desc.members}
    assert new_ids["instance-2"] == old_ids["instance-2"]
    assert new_ids["instance-1"] != old_ids["instance-1"]

    # the replaced member id is fenced (82) when it shows up again with its instance id
    with Wire(broker) as w:
        resp = w.call(
            HeartbeatRequest[4](
                group_id=group,
                generation_id=1,
                member_id=old_ids["instance-1"],
                group_instance_id="instance-1",
            )
        )
    assert resp.error_code == 82
    c1b.close()
    c2.close()
