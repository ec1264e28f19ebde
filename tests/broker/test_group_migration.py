"""``group.consumer.migration.policy`` against a real ``seglog serve``: an empty classic
group becomes a KIP-848 consumer group when a ``group.protocol=consumer`` member joins and
back when a classic member joins, committed offsets kept; a classic group with live
members is converted online (Kafka 4.x): its classic members keep consuming as classic
members of the consumer group, and when the last consumer-protocol member leaves the group
becomes classic again. No record is lost or read twice across either conversion, also over
a broker kill -9 in the mixed state. Under ``disabled`` live groups are refused with
Kafka's codes (69 / 23)."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError as KPError
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.structs import OffsetAndMetadata
from tests._wait import wait_until
from typer.testing import CliRunner

from seglog.broker import BrokerProcess, free_port, start_broker
from seglog.broker.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from seglog.cli import build_app

from ._wire import Wire, ensure_topic

HB: Any = ConsumerGroupHeartbeatRequest
DESCRIBE: Any = ConsumerGroupDescribeRequest
SUB: Any = ConsumerProtocolSubscription
ASSIGNMENT: Any = ConsumerProtocolAssignment
BROKER_ARGS = (
    "--group-consumer-heartbeat-interval-ms", "500",
    "--group-consumer-session-timeout-ms", "6000",
)  # fmt: skip
PARTITIONS = 2
SHARED_PARTITIONS = 6
CLASSIC = {"heartbeat.interval.ms": 500, "session.timeout.ms": 6000}


def _consumer(broker: str, group: str, protocol: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def _produce(broker: str, topic: str, batch: str) -> set[str]:
    """Five records per partition, values ``batch-partition-i``."""
    producer = Producer({"bootstrap.servers": broker})
    values = set()
    for p in range(PARTITIONS):
        for i in range(5):
            value = f"{batch}-{p}-{i}"
            producer.produce(topic, value=value.encode(), partition=p)
            values.add(value)
    assert producer.flush(15) == 0
    return values


def _consume_exactly(broker: str, group: str, topic: str, protocol: str, want: set[str]) -> None:
    """One member of ``protocol`` reads from the group's committed offsets until it has
    ``want`` (anything else, or a record twice, fails), commits, and leaves."""
    consumer = _consumer(broker, group, protocol)
    consumer.subscribe([topic])
    got: list[str] = []

    def step() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value().decode())
        return len(got) >= len(want)

    try:
        wait_until(step, 60, interval=0, message=f"{protocol} member read {sorted(got)}")
        assert sorted(got) == sorted(want)  # nothing from an earlier batch, no duplicate
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _group_type(bootstrap: str, group: str) -> tuple[str, str] | None:
    """(group type, state) from ListGroups v5, None when the group is not listed."""
    with Wire(bootstrap) as w:
        listed = w.call(ListGroupsRequest[5](states_filter=[], types_filter=[]))
    rows = [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group]
    return rows[0] if rows else None


def _member_types(bootstrap: str, group: str) -> list[int]:
    """ConsumerGroupDescribe v1's member types (KIP-1099: 0 classic, 1 consumer), sorted."""
    with Wire(bootstrap) as w:
        desc = w.call(DESCRIBE[1](group_ids=[group], include_authorized_operations=False))
    return sorted(m.member_type for m in desc.groups[0].members)


def test_empty_groups_switch_protocol_keeping_offsets_across_kill9(
    tmp_path: Path, topic: str
) -> None:
    """classic -> consumer -> (kill -9) -> classic: each member reads exactly the batch
    produced since the previous one committed, and ListGroups shows the type of the
    moment (Kafka's conversion of an empty group, any policy)."""
    data, port = tmp_path / "data", free_port()
    proc = start_broker(data, port=port, extra_args=BROKER_ARGS)
    group = f"{topic}-g"
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})  # alive until resolved
        admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(15)
        first = _produce(proc.bootstrap, topic, "a")
        _consume_exactly(proc.bootstrap, group, topic, "classic", first)
        assert _group_type(proc.bootstrap, group) == ("classic", "Empty")

        second = _produce(proc.bootstrap, topic, "b")
        _consume_exactly(proc.bootstrap, group, topic, "consumer", second)
        assert _group_type(proc.bootstrap, group) == ("consumer", "Empty")

        proc.stop(signal.SIGKILL)
        proc = start_broker(data, port=port, extra_args=BROKER_ARGS)
        assert _group_type(proc.bootstrap, group) == ("consumer", "Empty")

        third = _produce(proc.bootstrap, topic, "c")
        _consume_exactly(proc.bootstrap, group, topic, "classic", third)
        assert _group_type(proc.bootstrap, group) == ("classic", "Empty")

        proc.stop(signal.SIGKILL)
        proc = start_broker(data, port=port, extra_args=BROKER_ARGS)
        fourth = _produce(proc.bootstrap, topic, "d")
        _consume_exactly(proc.bootstrap, group, topic, "consumer", fourth)
        assert _group_type(proc.bootstrap, group) == ("consumer", "Empty")
    finally:
        proc.stop()
        assert " ERROR " not in proc.log_text(), proc.log_text()


# -- online migration with real clients ---------------------------------------------------

Seen = Counter[tuple[int, int]]


class ConfluentMember:
    """A confluent-kafka member (classic or consumer protocol): consume, commit
    synchronously, then count (a record counts only once its offset is committed, so a
    count of 2 is a real re-delivery); what is not committed is read again."""

    def __init__(self, consumer: Consumer, topic: str, seen: Seen) -> None:
        self.consumer = consumer
        self.seen = seen
        self.revoked: set[int] = set()

        def lost(_c: Any, parts: list[TopicPartition]) -> None:
            self.revoked.update(tp.partition for tp in parts)

        consumer.subscribe([topic], on_revoke=lost, on_lost=lost)

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def step(self) -> None:
        self.revoked.clear()
        msgs = [m for m in self.consumer.consume(100, 0.05) if m.error() is None]
        if not msgs:
            return
        topic = msgs[0].topic()
        # a partition revoked during the call (eager: maybe assigned again at once) is read
        # again from where it stands (its first record here), never skipped
        first: dict[int, int] = {}
        for m in msgs:
            first.setdefault(m.partition(), m.offset())
        owned = self.assignment()
        for p in self.revoked & owned & set(first):
            self.consumer.seek(TopicPartition(topic, p, first[p]))
        msgs = [m for m in msgs if m.partition() not in self.revoked]
        if not msgs:
            return
        last = {m.partition(): m.offset() for m in msgs}
        offsets = [TopicPartition(topic, p, o + 1) for p, o in last.items()]
        try:
            done = self.consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException:
            done = []
        ok = {tp.partition for tp in done if tp.error is None}
        rewound: set[int] = set()
        for m in msgs:
            if m.partition() in ok:
                self.seen[(m.partition(), m.offset())] += 1
            elif m.partition() not in rewound:
                rewound.add(m.partition())
                self.consumer.seek(TopicPartition(topic, m.partition(), m.offset()))

    def close(self) -> None:
        self.consumer.close()


class _Revoked(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, revoked: set[int]) -> None:
        self.revoked = revoked

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.revoked.update(tp.partition for tp in revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        pass


class KafkaPythonMember:
    """The same with kafka-python (a classic-only client, protocols range + roundrobin)."""

    def __init__(self, broker: str, group: str, topic: str, seen: Seen) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=broker,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=500,
            session_timeout_ms=6000,
        )
        self.topic = topic
        self.seen = seen
        self.revoked: set[int] = set()
        self.consumer.subscribe([topic], listener=_Revoked(self.revoked))

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def step(self) -> None:
        self.revoked.clear()
        batches = self.consumer.poll(timeout_ms=50, max_records=100)
        msgs = [r for records in batches.values() for r in records]
        first: dict[int, int] = {}
        for r in msgs:
            first.setdefault(r.partition, r.offset)
        for p in self.revoked & self.assignment() & set(first):  # as ConfluentMember
            self.consumer.seek(KTopicPartition(self.topic, p), first[p])
        msgs = [r for r in msgs if r.partition not in self.revoked]
        if not msgs:
            return
        last = {r.partition: r.offset for r in msgs}
        offsets = {
            KTopicPartition(self.topic, p): OffsetAndMetadata(o + 1, "", -1)
            for p, o in last.items()
        }
        try:
            self.consumer.commit(offsets)
            ok = set(last)
        except KPError:
            ok = set()
        rewound: set[int] = set()
        for r in msgs:
            if r.partition in ok:
                self.seen[(r.partition, r.offset)] += 1
            elif r.partition not in rewound and r.partition in self.assignment():
                rewound.add(r.partition)
                self.consumer.seek(KTopicPartition(self.topic, r.partition), r.offset)

    def close(self) -> None:
        self.consumer.close()


Member = ConfluentMember | KafkaPythonMember


class Feeder:
    """A steady producer: one record to each partition per call, ``total`` per partition."""

    def __init__(self, broker: str, topic: str, total: int) -> None:
        self.producer = Producer({"bootstrap.servers": broker})
        self.topic = topic
        self.total = total
        self.sent = 0

    def step(self) -> None:
        if self.sent < self.total:
            for p in range(SHARED_PARTITIONS):
                self.producer.produce(self.topic, value=f"{p}-{self.sent}".encode(), partition=p)
            self.sent += 1
            self.producer.poll(0)

    def finish(self) -> None:
        while self.sent < self.total:
            self.step()
        assert self.producer.flush(15) == 0

    def expected(self) -> set[tuple[int, int]]:
        return {(p, o) for p in range(SHARED_PARTITIONS) for o in range(self.total)}


def _drive(
    members: list[Member],
    feeder: Feeder,
    done: Callable[[], bool],
    message: str | Callable[[], str],
) -> None:
    def step() -> bool:
        feeder.step()
        for m in members:
            m.step()
        return done()

    def shown() -> str:
        text = message() if callable(message) else message
        return f"{text}: assignments {[sorted(m.assignment()) for m in members]}"

    wait_until(step, 90, interval=0, message=shown)


def _missing(seen: Seen, want: set[tuple[int, int]]) -> Callable[[], str]:
    def text() -> str:
        gone = sorted(want - set(seen))
        return f"not every record was read ({len(gone)} missing, first {gone[:10]})"

    return text


def _shared(members: list[Member]) -> bool:
    """Every member has partitions, none twice, all of them covered."""
    shares = [m.assignment() for m in members]
    return (
        all(shares)
        and sum(len(s) for s in shares) == SHARED_PARTITIONS
        and set().union(*shares) == set(range(SHARED_PARTITIONS))
    )


def _classic_members(kind: str, broker: str, group: str, topic: str, seen: Seen) -> list[Member]:
    if kind == "kafka-python":
        return [KafkaPythonMember(broker, group, topic, seen) for _ in range(2)]
    strategy = {"partition.assignment.strategy": kind}
    return [
        ConfluentMember(_consumer(broker, group, "classic", **CLASSIC, **strategy), topic, seen)
        for _ in range(2)
    ]


def _topic6(broker: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})  # alive until the future resolves
    admin.create_topics([NewTopic(topic, SHARED_PARTITIONS)])[topic].result(15)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["range", "cooperative-sticky", "kafka-python"])
def test_live_classic_group_upgrades_and_downgrades_online(
    broker_factory: Any, topic: str, kind: str
) -> None:
    """Two classic members consume a 6-partition topic under a steady producer; a
    ``group.protocol=consumer`` member joins: the group becomes a consumer group whose
    three members (two classic) share all partitions; it closes: the group is classic
    again and the two classic members own everything. Every record is read exactly once
    (committed offsets carried through both conversions)."""
    proc: BrokerProcess = broker_factory(extra_args=BROKER_ARGS)
    broker, group = proc.bootstrap, f"{topic}-g"
    _topic6(broker, topic)
    seen: Seen = Counter()
    feeder = Feeder(broker, topic, 300)
    members = _classic_members(kind, broker, group, topic, seen)
    try:
        _drive(
            members, feeder,
            lambda: _shared(members) and _group_type(broker, group) == ("classic", "Stable"),
            "the classic members never shared the partitions",
        )  # fmt: skip
        newcomer = ConfluentMember(_consumer(broker, group, "consumer"), topic, seen)
        mixed: list[Member] = [*members, newcomer]
        _drive(
            mixed, feeder,
            lambda: _shared(mixed) and _group_type(broker, group) == ("consumer", "Stable"),
            "the consumer group never settled with three members",
        )  # fmt: skip
        assert _member_types(broker, group) == [0, 0, 1]
        newcomer.close()
        # kafka-python members may rebalance a few more times (a heartbeat answered 27 after
        # the member already rejoined makes it rejoin once more): the type is what counts
        settled = ("classic", "Stable") if kind != "kafka-python" else ("classic",)
        _drive(
            members, feeder,
            lambda: (kind == "kafka-python" or _shared(members))
            and _group_type(broker, group)[: len(settled)] == settled,  # type: ignore[index]
            "the downgraded classic group never settled",
        )  # fmt: skip
        feeder.finish()
        want = feeder.expected()
        _drive(members, feeder, lambda: set(seen) >= want, _missing(seen, want))
        assert set(seen) == want
        assert [k for k, n in seen.items() if n > 1] == []  # none read twice
    finally:
        for m in members:
            m.close()
    log = proc.log_text()
    assert "upgraded to a consumer group" in log
    assert "downgraded to a classic group" in log
    assert " ERROR " not in log


@pytest.mark.slow
def test_broker_kill9_in_the_mixed_state(tmp_path: Path, topic: str) -> None:
    """kill -9 while two classic members and a consumer-protocol member share the group:
    the restarted broker still knows the consumer group (its snapshot in
    ``__consumer_offsets``, classic members included), the members carry on and every
    record is read exactly once."""
    data, port = tmp_path / "data", free_port()
    proc = start_broker(data, port=port, extra_args=BROKER_ARGS)
    broker, group = proc.bootstrap, f"{topic}-g"
    _topic6(broker, topic)
    seen: Seen = Counter()
    feeder = Feeder(broker, topic, 200)
    members = _classic_members("range", broker, group, topic, seen)
    members.append(ConfluentMember(_consumer(broker, group, "consumer"), topic, seen))
    try:
        _drive(
            members, feeder,
            lambda: _shared(members) and _group_type(broker, group) == ("consumer", "Stable"),
            "the mixed group never settled",
        )  # fmt: skip
        feeder.producer.flush(15)
        proc.stop(signal.SIGKILL)
        proc = start_broker(data, port=port, extra_args=BROKER_ARGS)
        assert _group_type(broker, group) is not None
        assert _group_type(broker, group)[0] == "consumer"  # type: ignore[index]
        assert _member_types(broker, group) == [0, 0, 1]
        feeder.finish()
        want = feeder.expected()
        _drive(members, feeder, lambda: set(seen) >= want, "not every record was read")
        assert set(seen) == want
        assert [k for k, n in seen.items() if n > 1] == []
        _drive(
            members, feeder, lambda: _shared(members), "the members did not share the partitions"
        )
    finally:
        for m in members:
            m.close()
        proc.stop()


# -- the classic protocol inside a consumer group, on the wire ------------------------------


def _subscription(topic: str, version: int = 1) -> bytes:
    return bytes(SUB(topics=[topic], user_data=None, owned_partitions=[]).encode(version=version))


def _join(
    w: Wire, group: str, member_id: str = "", *, protocol_type: str = "consumer",
    protocols: list[tuple[str, bytes]] | None = None, rebalance_timeout_ms: int = 10_000,
) -> Any:  # fmt: skip
    protocols = protocols if protocols is not None else [("range", b"")]
    return w.call(
        JoinGroupRequest[9](
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=rebalance_timeout_ms,
            member_id=member_id, group_instance_id=None, protocol_type=protocol_type,
            protocols=[
                JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                for n, m in protocols
            ],
            reason=None,
        )
    )  # fmt: skip


def _heartbeat(w: Wire, group: str, topic: str, member: str = "m1", epoch: int = 0) -> Any:
    if epoch != 0:
        return w.call(HB[0](group_id=group, member_id=member, member_epoch=epoch))
    return w.call(
        HB[0](
            group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[topic], topic_partitions=[],
        )
    )  # fmt: skip


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade"])
def test_classic_member_of_a_consumer_group_on_the_wire(
    broker_factory: Any, topic: str, policy: str
) -> None:
    """A raw classic member joins a consumer group with a consumer-protocol member: 79
    first, then an immediate answer (generation = its member epoch, its protocol, no
    leader); SyncGroup hands out its target as a ConsumerProtocolAssignment; Heartbeat,
    OffsetCommit and SyncGroup check its generation (22); bad input is 23; when the
    consumer-protocol member leaves the group becomes classic (``bidirectional``) or stays
    a consumer group (``upgrade``)."""
    proc = broker_factory(extra_args=(*BROKER_ARGS, "--group-consumer-migration-policy", policy))
    group = f"{topic}-g"
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, topic)
        first = _heartbeat(w, group, topic)
        assert first.error_code == 0
        # bad input: not the consumer protocol type, unreadable metadata -> 23
        assert _join(w, group, "x", protocol_type="connect").error_code == 23
        assert _join(w, group, "x", protocols=[("range", b"\x00\x01\x00")]).error_code == 23
        required = _join(w, group, protocols=[("range", _subscription(topic))])
        assert required.error_code == 79  # MEMBER_ID_REQUIRED
        member = required.member_id
        joined = _join(w, group, member, protocols=[("range", _subscription(topic))])
        assert joined.error_code == 0
        assert (joined.protocol_type, joined.protocol_name, joined.leader) == (
            "consumer", "range", "",
        )  # fmt: skip
        assert joined.members == []
        generation = joined.generation_id
        assert _member_types(proc.bootstrap, group) == [0, 1]
        # another protocol no classic member supports -> 23
        other = _join(w, group, "y", protocols=[("roundrobin", _subscription(topic))])
        assert other.error_code == 23

        def sync(gen: int) -> Any:
            return w.call(
                SyncGroupRequest[5](
                    group_id=group, generation_id=gen, member_id=member,
                    group_instance_id=None, protocol_type="consumer", protocol_name="range",
                    assignments=[],
                )
            )  # fmt: skip

        def heartbeat(gen: int) -> int:
            req = HeartbeatRequest[4](
                group_id=group, generation_id=gen, member_id=member, group_instance_id=None
            )
            return int(w.call(req).error_code)

        assert sync(generation + 1).error_code == 22  # ILLEGAL_GENERATION
        assert heartbeat(generation + 1) == 22
        synced = sync(generation)
        assert synced.error_code == 0
        assignment = ASSIGNMENT.decode(bytes(synced.assignment)[2:], version=1, header=False)
        mine = {p for tp in assignment.assigned_partitions for p in tp.partitions}
        assert mine <= {0}  # the single partition: held by the first member or handed over
        assert heartbeat(generation) in (0, 27)
        commit = OffsetCommitRequest[8]
        tp = commit.OffsetCommitRequestTopic(
            name=topic,
            partitions=[
                commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_metadata=""
                )
            ],
        )

        def commit_code(gen: int) -> int:
            req = commit(
                group_id=group, generation_id_or_member_epoch=gen, member_id=member,
                group_instance_id=None, retention_time_ms=-1, topics=[tp],
            )  # fmt: skip
            return int(w.call(req).topics[0].partitions[0].error_code)

        assert commit_code(generation + 1) == 22  # a classic member: ILLEGAL_GENERATION
        assert commit_code(generation) == 0  # OffsetCommit v8: fine for a classic member
        left = _heartbeat(w, group, topic, "m1", -1)
        assert left.error_code == 0
        expected = "classic" if policy == "bidirectional" else "consumer"
        assert _group_type(proc.bootstrap, group)[0] == expected  # type: ignore[index]
        leave = w.call(
            LeaveGroupRequest[3](
                group_id=group,
                members=[
                    LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)
                ],
            )
        )
        assert [m.error_code for m in leave.members] == [0]
    assert " ERROR " not in proc.log_text()


def test_a_classic_member_that_does_not_rejoin_is_removed(broker_factory: Any, topic: str) -> None:
    """A classic member told to rejoin (27) that keeps heartbeating without rejoining is
    removed after its rebalance timeout (Kafka's join timeout), not kept by its heartbeats:
    its next Heartbeat is 25 UNKNOWN_MEMBER_ID and the group goes on without it."""
    proc = broker_factory(extra_args=BROKER_ARGS)
    group = f"{topic}-g"
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, topic)
        assert _heartbeat(w, group, topic).error_code == 0
        protocols = [("range", _subscription(topic))]
        member = _join(w, group, protocols=protocols).member_id  # 79 first
        joined = _join(w, group, member, protocols=protocols, rebalance_timeout_ms=1000)
        assert joined.error_code == 0
        synced = w.call(
            SyncGroupRequest[5](
                group_id=group, generation_id=joined.generation_id, member_id=member,
                group_instance_id=None, protocol_type="consumer", protocol_name="range",
                assignments=[],
            )
        )  # fmt: skip
        assert synced.error_code == 0
        assert _heartbeat(w, group, topic, "m2").error_code == 0  # a new group epoch

        def heartbeat() -> int:
            req = HeartbeatRequest[4](
                group_id=group,
                generation_id=joined.generation_id,
                member_id=member,
                group_instance_id=None,
            )
            return int(w.call(req).error_code)

        assert heartbeat() == 27  # rejoin: it does not
        wait_until(lambda: heartbeat() == 25, 30, interval=0.2, message="still a member")
        assert _member_types(proc.bootstrap, group) == [1, 1]
    assert "did not rejoin within 1000 ms" in proc.log_text()


# -- refusals under ``disabled`` ----------------------------------------------------------


def _live_refusals(proc: BrokerProcess, topic: str) -> tuple[str, int]:
    """A live classic member's group refuses a consumer-protocol heartbeat (its message
    returned); a live consumer-protocol member's group refuses a JoinGroup (its code)."""
    classic_group, consumer_group = f"{topic}-classic", f"{topic}-consumer"
    classic = _consumer(proc.bootstrap, classic_group, "classic")
    classic.subscribe([topic])
    try:
        with Wire(proc.bootstrap) as w:
            ensure_topic(w, topic)
            wait_until(lambda: classic.poll(0.1) is None and bool(classic.assignment()), 60)
            refused = _heartbeat(w, classic_group, topic)
            assert refused.error_code == 69  # GROUP_ID_NOT_FOUND, as Kafka
            assert _heartbeat(w, consumer_group, topic).error_code == 0
            join_code = int(_join(w, consumer_group).error_code)
            assert _group_type(proc.bootstrap, classic_group) == ("classic", "Stable")
            assert _group_type(proc.bootstrap, consumer_group)[0] == "consumer"  # type: ignore[index]
            return str(refused.error_message), join_code
    finally:
        classic.close()


def test_live_groups_are_refused_as_kafka_under_disabled(broker_factory: Any, topic: str) -> None:
    """``disabled``: Kafka's own refusal text for the heartbeat; the JoinGroup is 23 and
    the broker says why in a WARNING."""
    proc = broker_factory(extra_args=("--group-consumer-migration-policy", "disabled"))
    message, join_code = _live_refusals(proc, topic)
    assert message == f"Group {topic}-classic is not a consumer group."
    assert join_code == 23
    assert f"JoinGroup for consumer group '{topic}-consumer' refused" in proc.log_text()


def _first_error(consumer: Consumer, topic: str) -> Any:
    """The first error a subscribed consumer's ``poll`` hands the application."""
    consumer.subscribe([topic])
    errors: list[Any] = []

    def step() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is not None:
            errors.append(msg.error())
        return bool(errors)

    try:
        wait_until(step, 60, interval=0, message="the refused member saw no error")
    finally:
        consumer.close()
    return errors[0]


def test_real_clients_see_the_refusal_under_disabled(broker_factory: Any, topic: str) -> None:
    """Not a silent failure for confluent-kafka: a group.protocol=consumer member of a
    live classic group gets a fatal error (69), a classic member of a live consumer group
    gets 23 INCONSISTENT_GROUP_PROTOCOL from ``poll``; the live members keep their
    partitions."""
    broker = broker_factory(extra_args=("--group-consumer-migration-policy", "disabled")).bootstrap
    classic_group, consumer_group = f"{topic}-classic", f"{topic}-consumer"
    with Wire(broker) as w:
        ensure_topic(w, topic)
    live = [
        _consumer(broker, classic_group, "classic"),
        _consumer(broker, consumer_group, "consumer"),
    ]
    for c in live:
        c.subscribe([topic])
    try:
        wait_until(lambda: all(c.poll(0.1) is None and c.assignment() for c in live), 60)
        upgrade = _first_error(_consumer(broker, classic_group, "consumer"), topic)
        assert upgrade.code() == KafkaError._FATAL
        assert "ConsumerGroupHeartbeat" in upgrade.str()
        assert "group id does not exist" in upgrade.str()
        downgrade = _first_error(_consumer(broker, consumer_group, "classic"), topic)
        assert downgrade.code() == 23  # INCONSISTENT_GROUP_PROTOCOL
        assert all(c.assignment() for c in live)
    finally:
        for c in live:
            c.close()


def test_unknown_policy_is_refused_at_start(tmp_path: Path) -> None:
    """A value outside Kafka's four stops ``seglog serve`` with a usage error."""
    args = ["serve", "--data-dir", str(tmp_path / "d"), "--group-consumer-migration-policy", "up"]
    result = CliRunner().invoke(build_app(), args, env={"COLUMNS": "300"})
    output = " ".join(result.output.replace("\u2502", " ").split())
    assert result.exit_code == 2, output
    expected = "group.consumer.migration.policy=up: not one of disabled, upgrade, downgrade"
    assert expected in output
    assert not (tmp_path / "d").exists()
