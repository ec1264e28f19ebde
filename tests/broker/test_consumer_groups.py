"""KIP-848 consumer groups (``group.protocol=consumer``) against a real ``seglog serve``:
confluent-kafka consumers joining, leaving, dying and joining later; regex subscriptions;
the classic/consumer boundary; Kafka's error codes for bad heartbeats and commits (raw
requests with the broker's own schema classes); and a broker kill -9 that keeps the groups
and their committed offsets."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest
from tests._wait import wait_until

from seglog.broker import free_port, start_broker
from seglog.broker.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)

from ._wire import Wire, ensure_topic

HB_MS = 500
SESSION_MS = 3000
BROKER_ARGS = (
    "--group-consumer-heartbeat-interval-ms", str(HB_MS),
    "--group-consumer-session-timeout-ms", str(SESSION_MS),
)  # fmt: skip
HB: Any = ConsumerGroupHeartbeatRequest
DESCRIBE: Any = ConsumerGroupDescribeRequest
REASSIGN_WITHIN_S = 4 * HB_MS / 1000
"""How soon freed partitions must reach a member: about one heartbeat interval (the
member learns it at its next heartbeat), with slack for a loaded machine."""


def _consumer(broker: str, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def _topic(broker: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker})  # alive until the future resolves
    admin.create_topics([NewTopic(name, partitions)])[name].result(15)


def _produce(broker: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": broker})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


class Member:
    """An in-process member: consume, commit synchronously, then count (so a record is
    counted only once its offset is committed while its partition is owned: a duplicate is
    a real re-delivery). Records of partitions revoked while ``consume`` ran are neither
    committed nor counted: their next owner reads them from the last commit."""

    def __init__(self, consumer: Consumer, topic: str, seen: Counter[tuple[str, int, int]]):
        self.consumer = consumer
        self.seen = seen
        self.revoked: set[tuple[str, int]] = set()

        def lost(_c: Any, parts: list[TopicPartition]) -> None:
            self.revoked.update((tp.topic, tp.partition) for tp in parts)

        consumer.subscribe([topic], on_revoke=lost, on_lost=lost)

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def step(self) -> None:
        self.revoked.clear()
        msgs = [m for m in self.consumer.consume(100, 0.05) if m.error() is None]
        msgs = [m for m in msgs if (m.topic(), m.partition()) not in self.revoked]
        if not msgs:
            return
        last: dict[tuple[str, int], int] = {}
        for m in msgs:
            last[(m.topic(), m.partition())] = m.offset()
        offsets = [TopicPartition(t, p, o + 1) for (t, p), o in last.items()]
        try:
            done = self.consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException:
            done = []
        committed = {(tp.topic, tp.partition) for tp in done if tp.error is None}
        rewound: set[tuple[str, int]] = set()
        for m in msgs:
            key = (m.topic(), m.partition())
            if key in committed:
                self.seen[(m.topic(), m.partition(), m.offset())] += 1
            elif key not in rewound:  # not committed: consume it again (or its next owner)
                rewound.add(key)
                self.consumer.seek(TopicPartition(m.topic(), m.partition(), m.offset()))


_CHILD = r"""
import json, os, sys
from confluent_kafka import Consumer, KafkaException, TopicPartition
broker, group, topic, pause = sys.argv[1:5]
c = Consumer({"bootstrap.servers": broker, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
revoked = set()
def lost(_c, parts):
    revoked.update(tp.partition for tp in parts)
c.subscribe([topic], on_revoke=lost, on_lost=lost)
shown = None
while True:
    revoked.clear()
    if os.path.exists(pause):
        print(json.dumps({"paused": True}), flush=True)
        c.poll(3600)  # alive (librdkafka heartbeats on its own thread) until killed
        continue
    msgs = [m for m in c.consume(100, 0.05) if m.error() is None]
    msgs = [m for m in msgs if m.partition() not in revoked]
    assignment = sorted(tp.partition for tp in c.assignment())
    if assignment != shown:
        shown = assignment
        print(json.dumps({"assignment": assignment}), flush=True)
    if not msgs:
        continue
    last = {}
    for m in msgs:
        last[m.partition()] = m.offset()
    try:
        done = c.commit(offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()],
                        asynchronous=False) or []
    except KafkaException:
        done = []
    ok = {tp.partition for tp in done if tp.error is None}
    rewound = set()
    for m in msgs:
        if m.partition() not in ok and m.partition() not in rewound:
            rewound.add(m.partition())
            c.seek(TopicPartition(topic, m.partition(), m.offset()))
    print(json.dumps({"records": [[m.partition(), m.offset()] for m in msgs
                                  if m.partition() in ok]}), flush=True)
"""


class ChildMember:
    """A member in its own process (killed with SIGKILL to die for real)."""

    def __init__(self, broker: str, group: str, topic: str, pause: Path) -> None:
        self.topic = topic
        self.pause = pause
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, broker, group, topic, str(pause)],
            stdout=subprocess.PIPE,
        )
        self.assigned: set[int] = set()
        self.records: list[tuple[int, int]] = []
        self.paused = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            doc = json.loads(line)
            if "assignment" in doc:
                self.assigned = set(doc["assignment"])
            if "records" in doc:
                self.records.extend((p, o) for p, o in doc["records"])
            if doc.get("paused"):
                self.paused = True

    def kill(self) -> None:
        """Stop consuming (nothing in flight), then SIGKILL: no leave, no commit."""
        self.pause.touch()
        wait_until(lambda: self.paused, 30, message="the child member did not pause")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(10)


def _drive(members: list[Member], done: Any, timeout: float = 60, message: str = "") -> float:
    """Step every member until ``done()``; returns the seconds it took."""
    started = time.monotonic()

    def step() -> bool:
        for m in members:
            m.step()
        return bool(done())

    wait_until(step, timeout, interval=0, message=message or "condition not reached")
    return time.monotonic() - started


def test_members_join_leave_die_and_join_later(broker: str, topic: str, tmp_path: Path) -> None:
    """3 members share 6 partitions; one leaves (close), one dies (SIGKILL: its session
    times out), one joins later. Every record is counted once (each counted after its
    commit), and partitions freed by a change reach a member within about a heartbeat
    interval of being released."""
    partitions = 6
    _topic(broker, topic, partitions)
    _produce(broker, topic, partitions, 20)
    group = f"{topic}-g"
    seen: Counter[tuple[str, int, int]] = Counter()
    a = Member(_consumer(broker, group, **{"client.id": "a"}), topic, seen)
    b = Member(_consumer(broker, group, **{"client.id": "b"}), topic, seen)
    child = ChildMember(broker, group, topic, tmp_path / "pause")
    members = [a, b]
    try:

        def shares() -> list[set[int]]:
            return [a.assignment(), b.assignment(), child.assigned]

        # uniform: 6 partitions over 3 members, 2 each once every move is done
        _drive(
            members,
            lambda: sorted(len(x) for x in shares()) == [2, 2, 2],
            message=lambda: f"three members did not get 2 partitions each: {shares()}",
        )
        assert set().union(*shares()) == set(range(partitions))

        # b leaves: its partitions go to a and the child within about a heartbeat
        b.consumer.close()
        members = [a]
        took = _drive(
            members,
            lambda: (
                a.assignment() | child.assigned == set(range(partitions))
                and not a.assignment() & child.assigned
            ),
            message="b's partitions were not reassigned",
        )
        assert took < REASSIGN_WITHIN_S, took

        # the child dies: after its session timeout a has everything
        child.kill()
        took = _drive(
            members, lambda: a.assignment() == set(range(partitions)), SESSION_MS / 1000 + 30
        )
        assert took < SESSION_MS / 1000 + REASSIGN_WITHIN_S, took
        _produce(broker, topic, partitions, 10)

        # d joins later: a gives up half, d gets them once a has let them go
        d = Member(_consumer(broker, group, **{"client.id": "d"}), topic, seen)
        members = [a, d]
        shrunk: list[float] = []

        def d_has_partitions() -> bool:
            if not shrunk and len(a.assignment()) < partitions:
                shrunk.append(time.monotonic())
            return bool(d.assignment())

        _drive(members, d_has_partitions, message="d got no partitions")
        assert shrunk, "a never gave partitions up"
        assert time.monotonic() - shrunk[0] < REASSIGN_WITHIN_S + 0.5
        _drive(members, lambda: len(a.assignment()) == len(d.assignment()) == 3)
        _produce(broker, topic, partitions, 10)

        total = partitions * 40

        def counted() -> Counter[tuple[str, int, int]]:
            counts = Counter(seen)
            counts.update((topic, p, o) for p, o in child.records)
            return counts

        _drive(
            members,
            lambda: len(counted()) >= total,
            message=lambda: f"{len(counted())} of {total} records counted",
        )
        counts = counted()
        assert len(counts) == total
        assert {k: v for k, v in counts.items() if v > 1} == {}  # none twice
        d.consumer.close()
    finally:
        a.consumer.close()
        if child.proc.poll() is None:
            child.proc.kill()
            child.proc.wait(10)


def test_regex_subscription_picks_up_a_topic_created_later(broker: str, topic: str) -> None:
    first, later = f"{topic}.rx.one", f"{topic}.rx.two"
    _topic(broker, first, 1)
    _produce(broker, first, 1, 3)
    consumer = _consumer(broker, f"{topic}-g")
    consumer.subscribe([f"^{topic.replace('.', '[.]')}[.]rx[.].*"])
    got: set[tuple[str, bytes]] = set()

    def collect(want: int) -> Any:
        def step() -> bool:
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                got.add((m.topic(), m.value() or b""))
            return len(got) >= want

        return step

    try:
        wait_until(collect(3), 60, interval=0, message=lambda: f"got {got}")
        _topic(broker, later, 2)
        _produce(broker, later, 2, 2)
        wait_until(collect(7), 60, interval=0, message=lambda: f"got {got}")
        assert {t for t, _ in got} == {first, later}
        admin = AdminClient({"bootstrap.servers": broker})
        desc = admin.describe_consumer_groups([f"{topic}-g"])[f"{topic}-g"].result(15)
        assert desc.type.name == "CONSUMER"
        assigned = {(tp.topic, tp.partition) for tp in desc.members[0].assignment.topic_partitions}
        assert assigned == {(first, 0), (later, 0), (later, 1)}
        listed = admin.list_consumer_groups().result(15).valid
        assert {g.group_id: g.type.name for g in listed}[f"{topic}-g"] == "CONSUMER"
    finally:
        consumer.close()


# -- raw requests: Kafka's error codes ---------------------------------------------------


def _hb(w: Wire, group: str, member: str, epoch: int, version: int = 1, **fields: Any) -> Any:
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", 30_000)
        fields.setdefault("topic_partitions", [])
    return w.call(HB[version](group_id=group, member_id=member, member_epoch=epoch, **fields))


def _owned(resp: Any) -> list[tuple[Any, list[int]]]:
    return [(tp.topic_id, sorted(tp.partitions)) for tp in resp.assignment.topic_partitions]


def test_heartbeat_errors_are_kafkas(broker: str, topic: str) -> None:
    group = f"{topic}-g"
    with Wire(broker) as w:
        topic_id = ensure_topic(w, topic)
        joined = _hb(w, group, "m1", 0, subscribed_topic_names=[topic])
        assert joined.error_code == 0, joined
        epoch = joined.member_epoch
        assert epoch > 0
        assert joined.heartbeat_interval_ms == HB_MS
        assert [(tp.topic_id, tp.partitions) for tp in joined.assignment.topic_partitions] == [
            (topic_id, [0])
        ]
        ok = _hb(w, group, "m1", epoch)
        assert (ok.error_code, ok.member_epoch, ok.assignment) == (0, epoch, None)
        # an epoch the coordinator never gave: 110, and the member is gone
        assert _hb(w, group, "m1", epoch + 5).error_code == 110
        assert _hb(w, group, "m1", epoch).error_code == 25
        assert _hb(w, group, "nobody", 3).error_code == 25
        assert _hb(w, f"{group}-none", "m1", 3).error_code == 69
        bad = _hb(w, group, "m2", 0, subscribed_topic_regex="(unclosed")
        assert bad.error_code == 128
        assert "(unclosed" in bad.error_message
        assert (
            _hb(
                w, group, "m2", 0, subscribed_topic_names=[topic], server_assignor="sticky"
            ).error_code
            == 112
        )
        no_timeout = _hb(w, group, "m2", 0, subscribed_topic_names=[topic], rebalance_timeout_ms=-1)
        assert no_timeout.error_code == 42
        assert (
            _hb(w, group, "", 0, subscribed_topic_names=[topic]).error_code == 42
        )  # v1: the client names itself
        v0 = _hb(w, group, "", 0, version=0, subscribed_topic_names=[topic])
        assert v0.error_code == 0
        assert v0.member_id  # v0: the coordinator names the member


def test_a_partition_moves_only_once_its_owner_released_it(broker: str, topic: str) -> None:
    """Incremental reassignment, one heartbeat at a time: the owner first gets an
    assignment without the partition (same epoch), the newcomer gets it only after the
    owner acknowledged by heartbeating without it; then both are at the new epoch."""
    group = f"{topic}-g"
    _topic(broker, topic, 2)
    with Wire(broker) as w:
        topic_id = ensure_topic(w, topic)
        m1 = _hb(w, group, "m1", 0, subscribed_topic_names=[topic])
        assert _owned(m1) == [(topic_id, [0, 1])]
        m2 = _hb(w, group, "m2", 0, subscribed_topic_names=[topic])
        assert (m2.error_code, _owned(m2)) == (0, [])  # both partitions still m1's
        assert m2.member_epoch > m1.member_epoch
        revoke = _hb(w, group, "m1", m1.member_epoch)
        assert revoke.member_epoch == m1.member_epoch  # revoking: epoch unchanged
        kept = _owned(revoke)
        assert len(kept[0][1]) == 1
        still = _hb(w, group, "m2", m2.member_epoch)
        assert still.assignment is None  # nothing released yet
        owned = [HB.TopicPartitions(topic_id=t, partitions=p) for t, p in kept]
        acked = _hb(w, group, "m1", m1.member_epoch, topic_partitions=owned)
        assert (acked.error_code, acked.member_epoch) == (0, m2.member_epoch)
        moved = _hb(w, group, "m2", m2.member_epoch)
        assert moved.member_epoch == m2.member_epoch
        assert _owned(moved) == [(topic_id, sorted({0, 1} - set(kept[0][1])))]
        desc = w.call(DESCRIBE[0](group_ids=[group], include_authorized_operations=False))
        assert desc.groups[0].group_state == "Stable"
        assert desc.groups[0].assignor_name == "uniform"


def test_a_member_that_does_not_revoke_in_time_is_removed(broker: str, topic: str) -> None:
    """An owner that keeps heartbeating but never acknowledges its revocation is removed
    after its rebalance timeout (well before its session timeout); the newcomer then gets
    the partition, and the old member's next heartbeat is 25 UNKNOWN_MEMBER_ID."""
    group = f"{topic}-g"
    _topic(broker, topic, 2)
    with Wire(broker) as w:
        m1 = _hb(w, group, "m1", 0, subscribed_topic_names=[topic], rebalance_timeout_ms=300)
        m2 = _hb(w, group, "m2", 0, subscribed_topic_names=[topic])
        assert _owned(m2) == []
        revoke = _hb(w, group, "m1", m1.member_epoch)
        assert len(_owned(revoke)[0][1]) == 1  # asked to give one partition up
        started = time.monotonic()

        def m2_owns_both() -> bool:
            _hb(w, group, "m1", m1.member_epoch)  # alive, but never acknowledging
            resp = _hb(w, group, "m2", m2.member_epoch)
            assert resp.error_code == 0
            m2.member_epoch = resp.member_epoch
            return resp.assignment is not None and len(_owned(resp)[0][1]) == 2

        wait_until(m2_owns_both, 10, interval=0.05, message="m1's partitions never moved")
        assert time.monotonic() - started < SESSION_MS / 1000  # not its session timeout
        assert _hb(w, group, "m1", m1.member_epoch).error_code == 25


def test_static_members_and_offsets_follow_member_epochs(broker: str, topic: str) -> None:
    group = f"{topic}-g"
    with Wire(broker) as w:
        ensure_topic(w, topic)
        first = _hb(w, group, "s1", 0, instance_id="inst", subscribed_topic_names=[topic])
        assert first.error_code == 0
        taken = _hb(w, group, "s2", 0, instance_id="inst", subscribed_topic_names=[topic])
        assert taken.error_code == 111  # UNRELEASED_INSTANCE_ID
        assert _hb(w, group, "s2", first.member_epoch, instance_id="inst").error_code == 82

        commit = OffsetCommitRequest[9]
        tp = commit.OffsetCommitRequestTopic(
            name=topic,
            partitions=[
                commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5, committed_metadata=""
                )
            ],
        )

        def commit_code(member: str, epoch: int, version: int = 9) -> int:
            req = OffsetCommitRequest[version](
                group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
                group_instance_id=None, retention_time_ms=-1, topics=[tp],
            )  # fmt: skip
            return int(w.call(req).topics[0].partitions[0].error_code)

        assert commit_code("s1", first.member_epoch + 1) == 113  # STALE_MEMBER_EPOCH
        assert commit_code("s1", first.member_epoch, version=8) == 35
        assert commit_code("ghost", first.member_epoch) == 25
        assert commit_code("", -1) == 25  # the group has members: no simple commits
        assert commit_code("s1", first.member_epoch) == 0
        fetch = OffsetFetchRequest[9]
        group_req = fetch.OffsetFetchRequestGroup(
            group_id=group, member_id="s1", member_epoch=first.member_epoch + 1, topics=None
        )
        assert w.call(fetch(groups=[group_req], require_stable=True)).groups[0].error_code == 113
        group_req.member_epoch = first.member_epoch
        fetched = w.call(fetch(groups=[group_req], require_stable=True)).groups[0]
        assert fetched.topics[0].partitions[0].committed_offset == 5

        # leave for now (-2): the instance keeps its partitions; s2 takes its place
        left = _hb(w, group, "s1", -2, instance_id="inst")
        assert (left.error_code, left.member_epoch) == (0, -2)
        back = _hb(w, group, "s2", 0, instance_id="inst", subscribed_topic_names=[topic])
        assert back.error_code == 0
        assert back.member_epoch == first.member_epoch
        assert _owned(back) == _owned(first)

        # the group with a member cannot be deleted; once it left, it can
        deleted = w.call(DeleteGroupsRequest[2](groups_names=[group]))
        assert deleted.results[0].error_code == 68
        assert _hb(w, group, "s2", -1, instance_id="inst").error_code == 0
        assert w.call(DeleteGroupsRequest[2](groups_names=[group])).results[0].error_code == 0
        gone = w.call(DESCRIBE[0](group_ids=[group], include_authorized_operations=False))
        assert gone.groups[0].error_code == 69


def test_classic_and_consumer_groups_do_not_mix(broker: str, topic: str) -> None:
    group = f"{topic}-g"
    with Wire(broker) as w:
        ensure_topic(w, topic)
        assert _hb(w, group, "m1", 0, subscribed_topic_names=[topic]).error_code == 0
        join = JoinGroupRequest[9](
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            group_instance_id=None, protocol_type="connect",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            reason=None,
        )  # fmt: skip
        # a classic member of another protocol type: 23 INCONSISTENT_GROUP_PROTOCOL (classic
        # consumers are taken in: test_group_migration)
        assert w.call(join).error_code == 23
        listed = w.call(ListGroupsRequest[5](states_filter=[], types_filter=["consumer"]))
        assert [
            (g.group_id, g.group_type, g.protocol_type)
            for g in listed.groups
            if g.group_id == group
        ] == [(group, "consumer", "consumer")]
        classic_only = w.call(ListGroupsRequest[5](states_filter=[], types_filter=["classic"]))
        assert group not in {g.group_id for g in classic_only.groups}
        described = w.call(
            DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False)
        )
        assert (described.groups[0].error_code, described.groups[0].group_state) == (0, "Dead")

    # a classic group with a live member of another protocol type than "consumer" is not
    # upgraded by a consumer-protocol heartbeat: 69 (Kafka's validateOnlineUpgrade)
    classic_group = f"{topic}-classic"
    with Wire(broker) as w, Wire(broker) as other:
        join.group_id, join.member_id = classic_group, ""
        join.protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name="x", metadata=b"")]
        other.send(join)
        member_id = other.recv(join).member_id  # 79 MEMBER_ID_REQUIRED first
        join.member_id = member_id
        joined = other.call(join)
        assert joined.error_code == 0
        refused = _hb(w, classic_group, "m1", 0, subscribed_topic_names=[topic])
        assert refused.error_code == 69
        assert refused.error_message == f"Group {classic_group} is not a consumer group."


def test_broker_kill9_keeps_the_group_and_its_offsets(tmp_path: Path, topic: str) -> None:
    """After kill -9 and a restart on the same data directory and port, the group is
    back with its epoch, members and assignments (a member heartbeats on with its epoch,
    no rejoin), its committed offsets too, and a live confluent-kafka member carries on."""
    data, port = tmp_path / "data", free_port()
    args = (*BROKER_ARGS, "--group-consumer-max-size", "2")
    proc = start_broker(data, port=port, extra_args=args)
    group, live_group = f"{topic}-g", f"{topic}-live"
    try:
        _topic(proc.bootstrap, topic, 2)
        _produce(proc.bootstrap, topic, 2, 5)
        with Wire(proc.bootstrap) as w:
            for name in ("x1", "x2"):
                assert _hb(w, f"{group}-max", name, 0, subscribed_topic_names=[]).error_code == 0
            full = _hb(w, f"{group}-max", "x3", 0, subscribed_topic_names=[])
            assert full.error_code == 81  # GROUP_MAX_SIZE_REACHED (group.consumer.max.size)
            joined = _hb(w, group, "m1", 0, subscribed_topic_names=[topic])
            assert joined.error_code == 0
            commit = OffsetCommitRequest[9]
            part = commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition
            req = commit(
                group_id=group, generation_id_or_member_epoch=joined.member_epoch,
                member_id="m1", group_instance_id=None, retention_time_ms=-1,
                topics=[commit.OffsetCommitRequestTopic(
                    name=topic, partitions=[part(partition_index=1, committed_offset=4,
                                                 committed_metadata="")])],
            )  # fmt: skip
            assert w.call(req).topics[0].partitions[0].error_code == 0
        seen: Counter[tuple[str, int, int]] = Counter()
        live = Member(_consumer(proc.bootstrap, live_group), topic, seen)
        _drive([live], lambda: len(seen) == 10, message="the live member did not consume")
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        before = admin.describe_consumer_groups([live_group])[live_group].result(15)

        proc.stop(signal.SIGKILL)
        proc = start_broker(data, port=port, extra_args=args)
        with Wire(proc.bootstrap) as w:
            desc = w.call(DESCRIBE[0](group_ids=[group], include_authorized_operations=False))
            g = desc.groups[0]
            assert (g.error_code, g.group_epoch) == (0, joined.member_epoch)
            assert [(m.member_id, m.member_epoch) for m in g.members] == [
                ("m1", joined.member_epoch)
            ]
            restored = g.members[0].assignment.topic_partitions[0]
            assert (restored.topic_name, sorted(restored.partitions)) == (topic, [0, 1])
            again = _hb(w, group, "m1", joined.member_epoch)  # on with its epoch: no rejoin
            assert (again.error_code, again.member_epoch) == (0, joined.member_epoch)
            fetch = OffsetFetchRequest[9]
            asked = fetch.OffsetFetchRequestGroup(
                group_id=group, member_id="m1", member_epoch=joined.member_epoch, topics=None
            )
            got = w.call(fetch(groups=[asked], require_stable=True)).groups[0]
            assert got.error_code == 0
            assert [(p.partition_index, p.committed_offset) for p in got.topics[0].partitions] == [
                (1, 4)
            ]
        _produce(proc.bootstrap, topic, 2, 3)
        _drive([live], lambda: len(seen) == 16, message="the live member did not carry on")
        assert max(seen.values()) == 1
        after = admin.describe_consumer_groups([live_group])[live_group].result(15)
        assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
        live.consumer.close()
    finally:
        proc.stop()
        assert " ERROR " not in proc.log_text(), proc.log_text()
