"""The data side of the online group migration (no broker): Kafka's embedded consumer
protocol read and written by ``coordinator.consumer_protocol``, a classic group turned into
a consumer group and back (``group_migration``), and a consumer group with classic members
through its ``__consumer_offsets`` snapshot."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from seglog.broker.coordinator.consumer_group_model import ConsumerGroup
from seglog.broker.coordinator.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from seglog.broker.coordinator.group_migration import (
    to_classic_group,
    to_consumer_group,
    upgrade_refusal,
)
from seglog.broker.coordinator.group_model import Group, GroupState, Member

SUB: Any = ConsumerProtocolSubscription
ASSIGNMENT: Any = ConsumerProtocolAssignment


def _subscription(topics: list[str], owned: dict[str, list[int]], version: int) -> bytes:
    return bytes(
        SUB(
            topics=topics,
            user_data=None,
            owned_partitions=[SUB.TopicPartition(topic=t, partitions=p) for t, p in owned.items()],
            generation_id=4,
            rack_id="r1",
        ).encode(version=version)
    )


def test_subscriptions_of_every_version_are_read() -> None:
    """v0 has topics only; v1 adds owned partitions, v3 the rack; a later version is read
    as v3 (its new fields come after)."""
    v0 = decode_subscription(_subscription(["b", "a"], {"a": [1]}, 0))
    assert (v0.version, v0.topics, v0.owned, v0.rack_id) == (0, ("a", "b"), frozenset(), None)
    v1 = decode_subscription(_subscription(["a"], {"a": [0, 2]}, 1))
    assert v1.owned == {("a", 0), ("a", 2)}
    v3 = decode_subscription(_subscription(["a"], {}, 3))
    assert v3.rack_id == "r1"
    later = b"\x00\x07" + _subscription(["a"], {"a": [5]}, 3)[2:] + b"future field"
    assert decode_subscription(later).owned == {("a", 5)}


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05", b"\x00\x00\xff\xff"],
)
def test_malformed_subscriptions_are_value_errors(data: bytes) -> None:
    with pytest.raises(ValueError, match="consumer protocol subscription"):
        decode_subscription(data)


@pytest.mark.parametrize("version", [0, 1, 3, 9])
def test_assignments_round_trip_in_the_members_version(version: int) -> None:
    tps = frozenset({("a", 0), ("a", 3), ("b", 1)})
    data = encode_assignment(tps, version)
    assert data[:2] == min(version, 3).to_bytes(2, "big")
    assert decode_assignment(data) == tps
    decoded = ASSIGNMENT.decode(data[2:], version=min(version, 3), header=False)
    assert sorted((tp.topic, sorted(tp.partitions)) for tp in decoded.assigned_partitions) == [
        ("a", [0, 3]),
        ("b", [1]),
    ]
    assert decode_assignment(b"") == frozenset()


def _classic_group() -> Group:
    group = Group("g", state=GroupState.STABLE, generation=7, protocol_type="consumer")
    group.protocol_name = "range"
    for i, parts in enumerate(([0, 1], [2])):
        member_id = f"m{i}"
        group.members[member_id] = Member(
            member_id, "inst" if i else None, f"client{i}", "/127.0.0.1", 10_000 + i, 30_000,
            "consumer",
            [("range", _subscription(["t"], {}, 1)), ("roundrobin", _subscription(["t"], {}, 1))],
            assignment=encode_assignment(frozenset(("t", p) for p in parts), 1),
        )  # fmt: skip
    group.static_members["inst"] = "m1"
    group.leader = "m0"
    return group


def test_a_classic_group_becomes_a_consumer_group_and_back() -> None:
    """Kafka's fromClassicGroup: epochs = the generation, assignments kept as current and
    target, classic metadata kept; fromConsumerGroup: the same members, assignments,
    protocols, static members, generation = the member epoch, leader = the first."""
    consumer = to_consumer_group(_classic_group())
    assert (consumer.group_epoch, consumer.assignment_epoch) == (7, 7)
    m0, m1 = consumer.members["m0"], consumer.members["m1"]
    assert m0.assigned == consumer.target["m0"] == {("t", 0), ("t", 1)}
    assert (m0.member_epoch, m0.subscribed_names, m0.rebalance_timeout_ms) == (7, ("t",), 30_000)
    assert m1.classic is not None
    assert m1.classic.session_timeout_ms == 10_001
    assert m1.classic.protocol_name == "range"
    assert consumer.static_members == {"inst": "m1"}

    snapshot = consumer.snapshot()  # what __consumer_offsets keeps, classic members included
    loaded = ConsumerGroup.from_snapshot("g", snapshot)
    assert loaded.members["m1"].classic == m1.classic
    assert loaded.snapshot() == snapshot

    classic = to_classic_group(loaded)
    assert (classic.generation, classic.protocol_type, classic.protocol_name) == (
        7, "consumer", "range",
    )  # fmt: skip
    assert classic.leader == "m0"
    assert classic.static_members == {"inst": "m1"}
    assert [m.session_timeout_ms for m in classic.members.values()] == [10_000, 10_001]
    assert decode_assignment(classic.members["m1"].assignment) == {("t", 2)}


def test_conversions_refuse_what_kafka_refuses(caplog: pytest.LogCaptureFixture) -> None:
    """Not the consumer protocol type, too many members, a policy without upgrade: the
    heartbeat's message is Kafka's; a malformed subscription or a consumer-protocol member
    stops a conversion with ValueError."""
    caplog.set_level(logging.INFO, "seglog.broker.coordinator.group_migration")
    group = _classic_group()
    assert upgrade_refusal(group, "bidirectional", 10) is None
    assert upgrade_refusal(group, "downgrade", 10) == "Group g is not a consumer group."
    assert upgrade_refusal(group, "upgrade", 1) == "Group g is not a consumer group."
    group.protocol_type = "connect"
    assert upgrade_refusal(group, "upgrade", 10) == "Group g is not a consumer group."
    assert "does not use the consumer embedded protocol" in caplog.text
    group.members["m0"].protocols = [("range", b"\x00\x01")]
    group.protocol_type = "consumer"
    with pytest.raises(ValueError, match="subscription"):
        to_consumer_group(group)
    mixed = to_consumer_group(_classic_group())
    mixed.members["m0"].classic = None
    with pytest.raises(ValueError, match="consumer protocol"):
        to_classic_group(mixed)
