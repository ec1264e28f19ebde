"""The ConsumerGroupHeartbeat interval a KIP-848 member is given: the configured
``group.consumer.heartbeat.interval.ms``, except while it waits for partitions other
members still have to release, when it gets seglog's shorter
``seglog.group.consumer.unreleased.heartbeat.interval.ms`` (for at most its rebalance
timeout). Raw heartbeats read ``HeartbeatIntervalMs`` from the answers; confluent-kafka
consumers show the effect: released partitions reach the newcomer well within one
interval of the owner's revocation."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests._wait import wait_until

from seglog.broker import BrokerProcess
from seglog.broker.protocol.messages.consumer_group import ConsumerGroupHeartbeatRequest

from ._wire import Wire, ensure_topic

HB_MS = 3000
UNRELEASED_MS = 50
BROKER_ARGS = (
    "--group-consumer-heartbeat-interval-ms", str(HB_MS),
    "--group-consumer-session-timeout-ms", "20000",
    "--seglog-group-consumer-unreleased-heartbeat-interval-ms", str(UNRELEASED_MS),
)  # fmt: skip
HB: Any = ConsumerGroupHeartbeatRequest


def _topic(broker: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(name, partitions)])[name].result(15)


def _hb(w: Wire, group: str, member: str, epoch: int, **fields: Any) -> Any:
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", 30_000)
        fields.setdefault("topic_partitions", [])
    resp = w.call(HB[1](group_id=group, member_id=member, member_epoch=epoch, **fields))
    assert resp.error_code == 0, resp
    return resp


def _parts(resp: Any) -> list[int]:
    return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)


def test_only_a_member_waiting_for_partitions_gets_the_short_interval(
    broker: str, topic: str
) -> None:
    """Stable members and an owner asked to revoke keep the configured interval; the
    newcomer waiting for the owner's release gets the short one until it has them."""
    group = f"{topic}-g"
    _topic(broker, topic, 2)
    with Wire(broker) as w:
        topic_id = ensure_topic(w, topic)
        m1 = _hb(w, group, "m1", 0, subscribed_topic_names=[topic])
        assert (_parts(m1), m1.heartbeat_interval_ms) == ([0, 1], HB_MS)
        assert _hb(w, group, "m1", m1.member_epoch).heartbeat_interval_ms == HB_MS
        m2 = _hb(w, group, "m2", 0, subscribed_topic_names=[topic])
        assert (_parts(m2), m2.heartbeat_interval_ms) == ([], UNRELEASED_MS)  # waiting
        assert _hb(w, group, "m2", m2.member_epoch).heartbeat_interval_ms == UNRELEASED_MS
        revoke = _hb(w, group, "m1", m1.member_epoch)  # told to give one partition up
        kept = _parts(revoke)
        assert len(kept) == 1
        assert revoke.heartbeat_interval_ms == HB_MS
        assert _hb(w, group, "m2", m2.member_epoch).heartbeat_interval_ms == UNRELEASED_MS
        owned = [HB.TopicPartitions(topic_id=topic_id, partitions=kept)]
        acked = _hb(w, group, "m1", m1.member_epoch, topic_partitions=owned)
        assert acked.heartbeat_interval_ms == HB_MS
        moved = _hb(w, group, "m2", m2.member_epoch)
        assert _parts(moved) == sorted({0, 1} - set(kept))
        assert moved.heartbeat_interval_ms == HB_MS  # nothing pending any more
        assert _hb(w, group, "m2", m2.member_epoch).heartbeat_interval_ms == HB_MS


def test_the_short_interval_lasts_at_most_the_rebalance_timeout(broker: str, topic: str) -> None:
    """A newcomer whose partitions are never released (the owner does not heartbeat)
    returns to the configured interval once its rebalance timeout has passed."""
    group = f"{topic}-g"
    _topic(broker, topic, 2)
    with Wire(broker) as w:
        _hb(w, group, "m1", 0, subscribed_topic_names=[topic])
        m2 = _hb(w, group, "m2", 0, subscribed_topic_names=[topic], rebalance_timeout_ms=400)
        assert m2.heartbeat_interval_ms == UNRELEASED_MS
        started = time.monotonic()
        wait_until(
            lambda: _hb(w, group, "m2", m2.member_epoch).heartbeat_interval_ms == HB_MS,
            10, interval=0.05, message="the short interval never ended",
        )  # fmt: skip
        assert time.monotonic() - started >= 0.4 * 0.9  # loop clock vs ours: a little slack
        again = _hb(w, group, "m2", m2.member_epoch)
        assert (_parts(again) if again.assignment else [], again.heartbeat_interval_ms) == (
            [],
            HB_MS,
        )  # still waiting, at the normal pace


def test_zero_turns_the_short_interval_off(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    args = (*BROKER_ARGS[:4], "--seglog-group-consumer-unreleased-heartbeat-interval-ms", "0")
    proc = broker_factory(args)
    group = f"{topic}-g"
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, topic)  # auto-created, 1 partition
        _hb(w, group, "m1", 0, subscribed_topic_names=[topic])
        m2 = _hb(w, group, "m2", 0, subscribed_topic_names=[topic])
        assert m2.heartbeat_interval_ms == HB_MS


def test_released_partitions_reach_the_newcomer_well_within_an_interval(
    broker: str, topic: str
) -> None:
    """confluent-kafka members: the newcomer joins half an interval after the owner's last
    heartbeat, so the owner hears of the revocation about half an interval later. With the
    configured interval only, the newcomer would take the released partition at its own
    next heartbeat, about half an interval (1.5 s) after the owner's ``on_revoke``; with
    the short interval it comes within about 50 ms. The bound, a quarter interval
    (750 ms), leaves room for polling and a loaded machine and still fails without it."""
    group = f"{topic}-g"
    _topic(broker, topic, 2)
    events: dict[str, float] = {}

    def consumer(name: str) -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": broker,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )

        def assigned(_c: Any, parts: list[TopicPartition]) -> None:
            if parts:
                events.setdefault(f"{name} assigned", time.monotonic())

        def revoked(_c: Any, parts: list[TopicPartition]) -> None:
            if parts:
                events.setdefault(f"{name} revoked", time.monotonic())

        c.subscribe([topic], on_assign=assigned, on_revoke=revoked)
        return c

    members = [consumer("owner")]

    def polled_until(done: Callable[[], bool]) -> Callable[[], bool]:
        def step() -> bool:  # callbacks run inside consume()
            for c in members:
                c.consume(10, 0.01)
            return done()

        return step

    try:
        wait_until(polled_until(lambda: "owner assigned" in events), 30, interval=0)
        # the owner acknowledged its assignment at once: its next heartbeat is an interval on
        half = events["owner assigned"] + HB_MS / 2000
        wait_until(polled_until(lambda: time.monotonic() >= half), 10, interval=0)
        members.append(consumer("newcomer"))
        wait_until(
            polled_until(lambda: "newcomer assigned" in events), 4 * HB_MS / 1000, interval=0,
            message=lambda: f"no partition moved: {events}",
        )  # fmt: skip
        assert "owner revoked" in events
        took = events["newcomer assigned"] - events["owner revoked"]
        assert took < HB_MS / 4000, f"{took:.3f} s from the owner's on_revoke to on_assign"
    finally:
        for c in members:
            c.close()
