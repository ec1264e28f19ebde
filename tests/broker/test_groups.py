"""Consumer groups (classic protocol) against a real ``seglog serve``: subscribe() with
confluent-kafka, kafka-python and aiokafka, partitions shared and rebalanced between
members, session expiry, committed offsets validated by generation, DescribeGroups /
ListGroups through the AdminClient, and bad JoinGroup/SyncGroup/Heartbeat input over raw
sockets."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests._wait import async_wait_until, wait_until

from seglog.broker import BrokerProcess

from ._wire import Wire, api_versions

PARTITIONS = 4


# This module's broker (conftest's ``broker_process``): auto-created topics have 4
# partitions, session timeouts down to 1 s are accepted (raw members expire fast).
BROKER_ARGS = (
    "--num-partitions",
    str(PARTITIONS),
    "--group-initial-rebalance-delay-ms",
    "100",
    "--group-min-session-timeout-ms",
    "1000",
)


def produce(bootstrap: str, topic: str, count: int) -> None:
    """``count`` messages b"0".. spread over the topic's partitions by key."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert producer.flush(30) == 0


def confluent_consumer(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            **conf,
        }
    )


def poll_values(consumers: list[Consumer], want: int, timeout: float = 30) -> list[bytes]:
    """Poll every consumer in turn until ``want`` messages arrived in total."""
    out: list[bytes] = []

    def poll_once() -> bool:
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                value = msg.value()
                assert value is not None
                out.append(value)
        return len(out) >= want

    wait_until(poll_once, timeout, interval=0, message=lambda: f"{len(out)} of {want}: {out}")
    return out


def wait_assignments(consumers: list[Consumer], check: Any, timeout: float = 30) -> list[set[int]]:
    """Poll until ``check(assignments)`` holds; returns each consumer's partitions."""

    def assigned() -> list[set[int]] | None:
        for c in consumers:
            c.poll(0.05)
        parts = [{tp.partition for tp in c.assignment()} for c in consumers]
        return parts if check(parts) else None

    return wait_until(
        assigned,
        timeout,
        interval=0,
        message=lambda: f"assignments {[c.assignment() for c in consumers]}",
    )


def test_advertised_group_apis(broker: str) -> None:
    versions = api_versions(broker)
    assert versions[11] == (0, 9)  # JoinGroup
    assert versions[12] == (0, 4)  # Heartbeat
    assert versions[13] == (0, 5)  # LeaveGroup
    assert versions[14] == (0, 5)  # SyncGroup
    assert versions[15] == (0, 6)  # DescribeGroups
    assert versions[16] == (0, 5)  # ListGroups


def test_confluent_subscribe_reads_all_and_commits(broker: str, topic: str) -> None:
    produce(broker, topic, 100)
    consumer = confluent_consumer(broker, f"g-{topic}")
    try:
        consumer.subscribe([topic])
        values = poll_values([consumer], 100)
        assert sorted(values, key=int) == [str(i).encode() for i in range(100)]
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
        committed = consumer.commit(asynchronous=False)
        assert committed is not None
        assert all(tp.error is None for tp in committed)
        assert sum(tp.offset for tp in committed) == 100
    finally:
        consumer.close()
    again = confluent_consumer(broker, f"g-{topic}")
    try:
        stored = again.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        assert sum(tp.offset for tp in stored) == 100
    finally:
        again.close()


def test_confluent_two_members_split_then_rebalance(broker: str, topic: str) -> None:
    produce(broker, topic, 40)
    group = f"g-{topic}"
    first, second = confluent_consumer(broker, group), confluent_consumer(broker, group)
    try:
        first.subscribe([topic])
        wait_assignments([first], lambda parts: len(parts[0]) == PARTITIONS)
        second.subscribe([topic])
        parts = wait_assignments(
            [first, second], lambda parts: all(parts) and sum(map(len, parts)) == PARTITIONS
        )
        assert all(parts), parts
        assert not parts[0] & parts[1]
        assert parts[0] | parts[1] == set(range(PARTITIONS))
        second.close()
        after = wait_assignments([first], lambda parts: len(parts[0]) == PARTITIONS)
        assert after == [set(range(PARTITIONS))]
    finally:
        first.close()
        second.close()


def test_kafka_python_commit_and_resume(broker: str, topic: str) -> None:
    produce(broker, topic, 60)
    group = f"g-{topic}"

    def consumer() -> KafkaConsumer:
        c = KafkaConsumer(
            bootstrap_servers=broker,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            consumer_timeout_ms=10_000,
        )
        c.subscribe([topic])
        return c

    first = consumer()
    try:
        seen = [m.value for _, m in zip(range(25), first, strict=False)]
        first.commit()
    finally:
        first.close()
    assert len(seen) == 25
    second = consumer()
    try:
        rest = [m.value for _, m in zip(range(35), second, strict=False)]
        second.commit()
    finally:
        second.close()
    assert sorted(seen + rest, key=int) == [str(i).encode() for i in range(60)]


async def test_aiokafka_subscribe_round_trip(broker: str, topic: str) -> None:
    produce(broker, topic, 30)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )
    await consumer.start()
    try:
        got: list[bytes] = []

        async def fetched_30() -> bool:
            batches = await consumer.getmany(timeout_ms=500)
            got.extend(m.value for msgs in batches.values() for m in msgs)
            return len(got) >= 30

        await async_wait_until(fetched_30, interval=0, message=lambda: f"got {got}")
        await consumer.commit()
        assert len(consumer.assignment()) == PARTITIONS
        committed = [await consumer.committed(tp) for tp in consumer.assignment()]
    finally:
        await consumer.stop()
    assert sorted(got, key=int) == [str(i).encode() for i in range(30)]
    assert sum(c for c in committed if c is not None) == 30


def test_admin_lists_and_describes_groups(broker: str, topic: str) -> None:
    produce(broker, topic, 4)
    group = f"g-{topic}"
    consumer = confluent_consumer(broker, group, **{"client.id": "describe-me"})
    admin = AdminClient({"bootstrap.servers": broker})
    try:
        consumer.subscribe([topic])
        wait_assignments([consumer], lambda parts: len(parts[0]) == PARTITIONS)
        listed = admin.list_consumer_groups().result(10)
        states = {g.group_id: g.state for g in listed.valid}
        assert states[group] == ConsumerGroupState.STABLE
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        (member,) = described.members
        assert member.client_id == "describe-me"
        assert member.host == "127.0.0.1"
        assigned = {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
        assert assigned == {(topic, p) for p in range(PARTITIONS)}
    finally:
        consumer.close()
    gone = admin.describe_consumer_groups([group])[group].result(10)
    assert gone.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)
    assert gone.members == []


# -- raw wire members -------------------------------------------------------------------


def join_request(group: str, member_id: str = "", version: int = 5, **kw: Any) -> Any:
    protocols = kw.pop("protocols", [("range", b"meta")])
    fields: dict[str, Any] = {
        "group_id": group,
        "session_timeout_ms": kw.pop("session_timeout_ms", 6000),
        "rebalance_timeout_ms": 10_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": kw.pop("protocol_type", "consumer"),
        "protocols": [
            JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols
        ],
        "reason": None,
    }
    return JoinGroupRequest[version](**fields)


def join(w: Wire, group: str, version: int = 5, **kw: Any) -> Any:
    """Join as a new member (answering 79 MEMBER_ID_REQUIRED on v4+)."""
    resp = w.call(join_request(group, "", version, **kw))
    if version >= 4:
        assert resp.error_code == 79
        assert resp.member_id
        resp = w.call(join_request(group, resp.member_id, version, **kw))
    return resp


def sync(w: Wire, group: str, generation: int, member: str, assign: dict[str, bytes]) -> Any:
    entries = [
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
        for m, a in assign.items()
    ]
    return w.call(
        SyncGroupRequest[3](
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            assignments=entries,
        )
    )


def heartbeat(w: Wire, group: str, generation: int, member: str) -> int:
    req = HeartbeatRequest[3](
        group_id=group, generation_id=generation, member_id=member, group_instance_id=None
    )
    return int(w.call(req).error_code)


def wait_heartbeat_code(w: Wire, group: str, generation: int, member: str) -> int:
    """Heartbeat every 0.2 s while the answer is 0 (up to 10 s); the first other code."""
    return wait_until(
        lambda: heartbeat(w, group, generation, member),
        timeout=10,
        interval=0.2,
        message="every heartbeat answered 0",
    )


def describe(w: Wire, group: str) -> Any:
    return w.call(DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False))


@pytest.mark.parametrize("version", range(10))
def test_raw_join_sync_heartbeat_leave_each_version(broker: str, topic: str, version: int) -> None:
    """JoinGroup v0-9 with SyncGroup/Heartbeat/LeaveGroup/DescribeGroups/ListGroups at
    the nearest version each serves (v0-3 joins take no MEMBER_ID_REQUIRED round)."""
    group = f"g-{topic}"
    v_sync, v_hb, v_leave, v_list = (
        min(version, 5),
        min(version, 4),
        min(version, 5),
        min(version, 5),
    )
    with Wire(broker) as w:
        joined = join(w, group, version)
        member = joined.member_id
        assert joined.error_code == 0
        assert joined.generation_id == 1
        assert joined.leader == member
        assert joined.protocol_name == "range"
        assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"meta")]
        assignment = [
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"mine")
        ]
        synced = w.call(
            SyncGroupRequest[v_sync](
                group_id=group,
                generation_id=1,
                member_id=member,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignment,
            )
        )
        assert (synced.error_code, synced.assignment) == (0, b"mine")
        hb = HeartbeatRequest[v_hb](
            group_id=group, generation_id=1, member_id=member, group_instance_id=None
        )
        assert w.call(hb).error_code == 0
        (desc,) = w.call(
            DescribeGroupsRequest[v_list](groups=[group], include_authorized_operations=False)
        ).groups
        assert (desc.group_state, desc.protocol_type, desc.protocol_data) == (
            "Stable",
            "consumer",
            "range",
        )
        assert desc.members[0].member_assignment == b"mine"
        listed = w.call(ListGroupsRequest[v_list](states_filter=[], types_filter=[])).groups
        assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed}
        if v_leave >= 3:
            identity = LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)
            resp = w.call(LeaveGroupRequest[v_leave](group_id=group, members=[identity]))
            assert (resp.error_code, [m.error_code for m in resp.members]) == (0, [0])
        else:
            resp = w.call(LeaveGroupRequest[v_leave](group_id=group, member_id=member))
            assert resp.error_code == 0
        assert describe(w, group).groups[0].group_state == "Dead"
        assert w.call(hb).error_code == 25


def test_raw_session_expiry_rebalances(broker: str, topic: str) -> None:
    """A member that stops heartbeating is removed after its session timeout; the member
    left is told to rejoin and becomes leader of the next generation."""
    group = f"g-{topic}"
    with Wire(broker) as a, Wire(broker) as b:
        ja = join(a, group, session_timeout_ms=1000)
        assert sync(a, group, 1, ja.member_id, {}).error_code == 0
        # b joins: its JoinGroup waits until a rejoins
        first = b.call(join_request(group))
        assert first.error_code == 79
        join_b = join_request(group, first.member_id)
        b.send(join_b)
        assert wait_heartbeat_code(a, group, 1, ja.member_id) == 27
        join_a = join_request(group, ja.member_id, session_timeout_ms=1000)
        a.send(join_a)
        ra, rb = a.recv(join_a), b.recv(join_b)
        assert (ra.error_code, rb.error_code) == (0, 0)
        assert ra.generation_id == rb.generation_id == 2
        assert ra.leader == ja.member_id
        assert {m.member_id for m in ra.members} == {
            ja.member_id,
            first.member_id,
        }
        assert rb.members == []
        assign = {ja.member_id: b"A", first.member_id: b"B"}
        sync_b = SyncGroupRequest[3](
            group_id=group,
            generation_id=2,
            member_id=first.member_id,
            group_instance_id=None,
            assignments=[],
        )
        b.send(sync_b)  # a follower's SyncGroup waits for the leader's
        assert sync(a, group, 2, ja.member_id, assign).assignment == b"A"
        assert b.recv(sync_b).assignment == b"B"
        # a goes silent; b keeps heartbeating until told to rejoin
        assert wait_heartbeat_code(b, group, 2, first.member_id) == 27
        again = b.call(join_request(group, first.member_id))
        assert again.error_code == 0
        assert again.generation_id == 3
        assert again.leader == first.member_id
        assert [m.member_id for m in again.members] == [first.member_id]
        assert heartbeat(a, group, 2, ja.member_id) == 25


def test_raw_bad_group_input(broker: str, topic: str) -> None:
    group = f"g-{topic}"
    with Wire(broker) as w, Wire(broker) as other:
        joined = join(w, group)
        member, gen = joined.member_id, joined.generation_id
        # another protocol type, or no protocol in common: 23
        assert other.call(join_request(group, protocol_type="connect")).error_code == 23
        mix = join_request(group, protocols=[("roundrobin", b"")])
        assert other.call(mix).error_code == 23
        # an empty protocol type for a new group: 23
        assert other.call(join_request(f"{group}-x", protocol_type="")).error_code == 23
        # unknown member id: 25; out-of-range session timeout: 26
        assert heartbeat(w, group, gen, "nobody") == 25
        assert heartbeat(w, f"{group}-none", 1, "nobody") == 25
        assert other.call(join_request(group, "nobody")).error_code == 25
        assert other.call(join_request(group, session_timeout_ms=10)).error_code == 26
        # wrong generation: 22
        assert sync(w, group, gen + 1, member, {}).error_code == 22
        assert sync(w, group, gen, "nobody", {}).error_code == 25
        assert sync(w, group, gen, member, {member: b"x"}).error_code == 0
        assert heartbeat(w, group, gen - 1, member) == 22
        listed = w.call(ListGroupsRequest[4](states_filter=["stable"])).groups
        assert group in {g.group_id for g in listed}
        assert {g.group_state for g in listed} == {"Stable"}


def commit_request(group: str, topic: str, generation: int, member: str, offset: int) -> Any:
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata=""
    )
    return OffsetCommitRequest[7](
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[part])],
    )


def test_offset_commit_checks_membership(broker: str, topic: str) -> None:
    produce(broker, topic, 4)
    group = f"g-{topic}"

    def commit(w: Wire, generation: int, member: str, offset: int) -> int:
        resp = w.call(commit_request(group, topic, generation, member, offset))
        return int(resp.topics[0].partitions[0].error_code)

    def fetched(w: Wire) -> int:
        topic_req = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
        resp = w.call(OffsetFetchRequest[5](group_id=group, topics=[topic_req]))
        return int(resp.topics[0].partitions[0].committed_offset)

    with Wire(broker) as w:
        assert commit(w, -1, "", 1) == 0  # simple commit, no members: kept
        assert commit(w, 5, "someone", 1) == 22  # no such group generation
        joined = join(w, group)
        member, gen = joined.member_id, joined.generation_id
        assert commit(w, gen, member, 2) == 27  # joined, not synced yet
        assert sync(w, group, gen, member, {}).error_code == 0
        assert commit(w, -1, "", 3) == 25  # the group has members now
        assert commit(w, gen, "nobody", 3) == 25
        assert commit(w, gen + 1, member, 3) == 22
        assert fetched(w) == 1
        assert commit(w, gen, member, 4) == 0
        assert fetched(w) == 4


def test_offset_delete_with_unreadable_member_metadata(broker: str, topic: str) -> None:
    """A member whose consumer-protocol metadata is truncated (its topic string cut short)
    counts as subscribed to everything: OffsetDelete answers 86 GROUP_SUBSCRIBED_TO_TOPIC,
    the commit stays, the connection keeps serving."""
    produce(broker, topic, 1)
    group = f"g-{topic}"
    name = topic.encode()
    cut = struct.pack(">hih", 0, 1, len(name)) + name[:-3]
    with Wire(broker) as w:
        joined = join(w, group, protocols=[("range", cut)])
        member, gen = joined.member_id, joined.generation_id
        assert sync(w, group, gen, member, {}).error_code == 0
        assert (
            w.call(commit_request(group, topic, gen, member, 3)).topics[0].partitions[0].error_code
            == 0
        )
        part = OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition
        req = OffsetDeleteRequest[0](
            group_id=group,
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic, partitions=[part(partition_index=0)]
                )
            ],
        )
        resp = w.call(req)
        assert resp.error_code == 0
        assert resp.topics[0].partitions[0].error_code == 86
        assert heartbeat(w, group, gen, member) == 0
        topic_req = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
        fetched = w.call(OffsetFetchRequest[5](group_id=group, topics=[topic_req]))
        assert fetched.topics[0].partitions[0].committed_offset == 3


def offset_delete_request(group: str, topic: str) -> Any:
    part = OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition
    return OffsetDeleteRequest[0](
        group_id=group,
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=topic, partitions=[part(partition_index=0)]
            )
        ],
    )


def test_offset_delete_of_non_consumer_group_with_members(broker: str, topic: str) -> None:
    """Kafka's ``handleDeleteOffsets``: a group with members whose protocol type is not
    "consumer" (here "connect") answers the whole request 68 NON_EMPTY_GROUP and keeps the
    commit, while PreparingRebalance as while Stable; once its last member left (Empty)
    the offset is deleted; an unknown group is 69 GROUP_ID_NOT_FOUND."""
    produce(broker, topic, 1)
    group = f"g-{topic}"

    def fetched(w: Wire) -> int:
        topic_req = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
        resp = w.call(OffsetFetchRequest[5](group_id=group, topics=[topic_req]))
        return int(resp.topics[0].partitions[0].committed_offset)

    with Wire(broker) as w, Wire(broker) as joiner:
        joined = join(w, group, protocol_type="connect", protocols=[("default", b"worker")])
        member, gen = joined.member_id, joined.generation_id
        assert sync(w, group, gen, member, {member: b""}).error_code == 0
        commit = w.call(commit_request(group, topic, gen, member, 3))
        assert commit.topics[0].partitions[0].error_code == 0
        resp = w.call(offset_delete_request(group, topic))
        assert (resp.error_code, resp.topics) == (68, [])
        assert fetched(w) == 3
        assert heartbeat(w, group, gen, member) == 0

        # a second worker's join starts a rebalance: the group is PreparingRebalance
        first = joiner.call(
            join_request(group, "", protocol_type="connect", protocols=[("default", b"w2")])
        )
        assert first.error_code == 79
        second = join_request(
            group, first.member_id, protocol_type="connect", protocols=[("default", b"w2")]
        )
        joiner.send(second)  # parked until the rebalance completes
        wait_until(
            lambda: describe(w, group).groups[0].group_state == "PreparingRebalance",
            timeout=10,
            interval=0.02,
            message="no rebalance started",
        )
        resp = w.call(offset_delete_request(group, topic))
        assert (resp.error_code, resp.topics) == (68, [])
        assert fetched(w) == 3

        # both leave: the group is Empty and its offset can be deleted
        leave = w.call(LeaveGroupRequest[1](group_id=group, member_id=member))
        assert leave.error_code == 0
        rejoined = joiner.recv(second)
        assert rejoined.error_code == 0
        leave = w.call(LeaveGroupRequest[1](group_id=group, member_id=rejoined.member_id))
        assert leave.error_code == 0
        assert describe(w, group).groups[0].group_state == "Empty"
        resp = w.call(offset_delete_request(group, topic))
        assert resp.error_code == 0
        assert [(t.name, [p.error_code for p in t.partitions]) for t in resp.topics] == [
            (topic, [0])
        ]
        assert fetched(w) == -1
        assert w.call(offset_delete_request(f"unknown-{topic}", topic)).error_code == 69


def test_members_joining_during_the_first_rebalance_share_it(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Kafka's ``GroupMetadata.add``: the first member gives the group its protocol type,
    so a second member of the same type joining while the first generation forms (the
    initial rebalance delay) joins it, not 23 INCONSISTENT_GROUP_PROTOCOL; one of another
    type still gets 23."""
    proc = broker_factory(["--group-initial-rebalance-delay-ms", "1000"])
    with Wire(proc.bootstrap) as a, Wire(proc.bootstrap) as b, Wire(proc.bootstrap) as c:
        first, second = join_request("g", "", 3), join_request("g", "", 3)
        a.send(first)
        wait_until(
            lambda: describe(c, "g").groups[0].group_state == "PreparingRebalance",
            timeout=10,
            interval=0.02,
            message="the first join did not start a rebalance",
        )
        b.send(second)
        other = c.call(join_request("g", "", 3, protocol_type="connect"))
        assert other.error_code == 23
        answers = [a.recv(first), b.recv(second)]
        assert [r.error_code for r in answers] == [0, 0]
        assert {r.generation_id for r in answers} == {1}
        assert len([r for r in answers if r.members]) == 1  # one leader, told both members
        leader = next(r for r in answers if r.members)
        assert len(leader.members) == 2


def test_shutdown_answers_parked_join(broker_factory: Callable[..., BrokerProcess]) -> None:
    """SIGTERM while a JoinGroup waits for a rebalance: it is answered with 16
    NOT_COORDINATOR at once and the broker exits cleanly."""
    proc = broker_factory()
    group = "parked"
    with Wire(proc.bootstrap) as a, Wire(proc.bootstrap) as b:
        ja = join(a, group)
        assert sync(a, group, ja.generation_id, ja.member_id, {}).error_code == 0
        first = b.call(join_request(group))
        parked = join_request(group, first.member_id)
        b.send(parked)  # waits for a to rejoin (rebalance timeout 10 s)
        assert wait_heartbeat_code(a, group, ja.generation_id, ja.member_id) == 27
        started = time.monotonic()
        assert proc.stop() == 0
        assert time.monotonic() - started < 5
        assert b.recv(parked).error_code == 16


def test_describe_groups_v6_unknown_group_is_group_id_not_found(broker: str, topic: str) -> None:
    """DescribeGroups v6 (KIP-1043) answers a group that does not exist with 69
    GROUP_ID_NOT_FOUND and Kafka's message; v5 still describes it Dead with no error; a
    live group and a group known only by committed offsets have no error at v6."""
    absent, offsets_only, live = f"absent-{topic}", f"offsets-{topic}", f"live-{topic}"
    produce(broker, topic, 1)
    with Wire(broker) as w:
        assert (
            w.call(commit_request(offsets_only, topic, -1, "", 1))
            .topics[0]
            .partitions[0]
            .error_code
            == 0
        )
        joined = join(w, live)
        assert sync(w, live, 1, joined.member_id, {joined.member_id: b"a"}).error_code == 0
        request = DescribeGroupsRequest[6](
            groups=[absent, offsets_only, live], include_authorized_operations=False
        )
        by_id = {g.group_id: g for g in w.call(request).groups}
        old = w.call(DescribeGroupsRequest[5](groups=[absent], include_authorized_operations=False))
    missing = by_id[absent]
    assert (missing.error_code, missing.error_message, missing.group_state) == (
        69,
        f"Group {absent} not found.",
        "Dead",
    )
    assert missing.members == []
    empty = by_id[offsets_only]
    assert (empty.error_code, empty.error_message, empty.group_state) == (0, None, "Empty")
    stable = by_id[live]
    assert (stable.error_code, stable.error_message, stable.group_state) == (0, None, "Stable")
    assert [(m.member_id, m.member_assignment) for m in stable.members] == [
        (joined.member_id, b"a")
    ]
    assert [(g.error_code, g.group_state) for g in old.groups] == [(0, "Dead")]


def test_kafka_python_describes_groups_at_v6(broker: str, topic: str) -> None:
    """kafka-python 3 negotiates DescribeGroups v6 (its newest) and reads the v6 error of a
    group that does not exist; a group with committed offsets is described without one."""
    from kafka.admin import KafkaAdminClient  # noqa: PLC0415

    known, absent = f"known-{topic}", f"absent-{topic}"
    produce(broker, topic, 1)
    with Wire(broker) as w:
        assert (
            w.call(commit_request(known, topic, -1, "", 1)).topics[0].partitions[0].error_code == 0
        )
    admin = KafkaAdminClient(bootstrap_servers=broker)
    try:
        described = admin.describe_groups([known, absent])
    finally:
        admin.close()
    assert described[known]["error"] is None
    assert described[known]["group_state"] == "Empty"
    error = described[absent]["error"]
    assert error is not None
    assert "GroupIdNotFound" in error, error
    assert f"Group {absent} not found." in error
