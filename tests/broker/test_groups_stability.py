"""Classic groups settle after a membership change: two members plus a third that joins
and leaves, with kafka-python >= 3 members and with a kafka-python + confluent-kafka
(librdkafka) group. After the last change the group stays Stable: no rebalance callback
on any member and no new generation in the broker's log for a quiet window of several
heartbeat intervals (eager protocols: every rebalance revokes and assigns on each
member, so a rejoin loop shows in the callbacks)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from tests._wait import wait_until

from seglog.broker import BrokerProcess

PARTITIONS = 4
HEARTBEAT_MS = 200
QUIET_S = 5 * HEARTBEAT_MS / 1000  # a loop rejoins at the next heartbeat (27) or poll

BROKER_ARGS = ("--group-initial-rebalance-delay-ms", "100")


class Events:
    """Rebalance callbacks of every member (member name, "revoked"/"assigned",
    partitions) and each member's current assignment."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, frozenset[int]]] = []
        self.assigned: dict[str, frozenset[int]] = {}

    def add(self, name: str, kind: str, partitions: frozenset[int]) -> None:
        with self.lock:
            self.log.append((name, kind, partitions))
            if kind == "assigned":
                self.assigned[name] = partitions
            else:
                self.assigned[name] = self.assigned.get(name, frozenset()) - partitions

    def count(self) -> int:
        with self.lock:
            return len(self.log)

    def covering(self, names: set[str]) -> bool:
        """Whether exactly ``names`` hold partitions, all of them, each once."""
        with self.lock:
            held = {n: p for n, p in self.assigned.items() if p}
            parts = [p for ps in held.values() for p in ps]
        return set(held) <= names and sorted(parts) == list(range(PARTITIONS))


class _Listener(ConsumerRebalanceListener):
    def __init__(self, name: str, events: Events) -> None:
        self.name, self.events = name, events

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.add(self.name, "revoked", frozenset(tp.partition for tp in revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.add(self.name, "assigned", frozenset(tp.partition for tp in assigned))


def _kafka_python(bootstrap: str, group: str, topic: str, name: str, events: Events) -> Any:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        enable_auto_commit=False,
        heartbeat_interval_ms=HEARTBEAT_MS,
        session_timeout_ms=6000,
    )
    consumer.subscribe([topic], listener=_Listener(name, events))
    return consumer


def _confluent(bootstrap: str, group: str, topic: str, name: str, events: Events) -> Any:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "enable.auto.commit": False,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "session.timeout.ms": 6000,
        }
    )

    def on_assign(_: Any, parts: list[Any]) -> None:
        events.add(name, "assigned", frozenset(tp.partition for tp in parts))

    def on_revoke(_: Any, parts: list[Any]) -> None:
        events.add(name, "revoked", frozenset(tp.partition for tp in parts))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


Factory = Callable[[str, str, str, str, Events], Any]


@contextmanager
def member(
    factory: Factory, bootstrap: str, group: str, topic: str, name: str, events: Events
) -> Iterator[None]:
    """A member polling in its own thread until the block ends, then closed (LeaveGroup)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            consumer = factory(bootstrap, group, topic, name, events)
            try:
                while not stop.is_set():
                    if isinstance(consumer, KafkaConsumer):
                        consumer.poll(timeout_ms=50)
                    else:
                        msg = consumer.poll(0.05)
                        assert msg is None or msg.error() is None, msg.error()
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"member-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive(), f"member {name} did not close"
        assert not errors, errors


def _generations(proc: BrokerProcess, group: str) -> list[int]:
    """The generations the broker's coordinator started for ``group`` (its INFO log)."""
    pattern = re.compile(rf"group '{re.escape(group)}': generation (\d+),")
    return [int(m.group(1)) for m in pattern.finditer(proc.log_text())]


def _describe(bootstrap: str, group: str) -> tuple[ConsumerGroupState, int]:
    """DescribeGroups: the group's state and member count."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(10)
    return described.state, len(described.members)


def _settled(proc: BrokerProcess, group: str, events: Events, names: set[str], after: int) -> int:
    """Wait until the group is Stable with ``names`` holding every partition at a
    generation newer than ``after``; return that generation."""

    def done() -> int | None:
        gens = _generations(proc, group)
        if not gens or gens[-1] <= after or not events.covering(names):
            return None
        state, members = _describe(proc.bootstrap, group)
        stable = (state, members) == (ConsumerGroupState.STABLE, len(names))
        return gens[-1] if stable else None

    return wait_until(done, timeout=60, interval=0.1, message=lambda: repr(events.log))


def _assert_quiet(proc: BrokerProcess, group: str, events: Events, generation: int) -> None:
    """No rebalance for the quiet window: no callback, no generation, still Stable."""
    seen = events.count()
    time.sleep(QUIET_S)  # a window that must see no event (several heartbeat intervals)
    assert events.log[seen:] == [], f"rebalanced again: {events.log[seen:]}"
    assert _generations(proc, group)[-1] == generation
    assert _describe(proc.bootstrap, group)[0] == ConsumerGroupState.STABLE


def _join_and_leave(
    proc: BrokerProcess, topic: str, first: Factory, second: Factory, third: Factory
) -> None:
    """``first`` (the leader) then ``second`` settle, ``third`` joins, gets partitions
    and leaves (LeaveGroup on close); the group settles again and stays quiet."""
    group = f"g-{topic}"
    bootstrap = proc.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    events = Events()
    with member(first, bootstrap, group, topic, "a", events):
        gen = _settled(proc, group, events, {"a"}, after=0)  # "a" is the leader
        with member(second, bootstrap, group, topic, "b", events):
            gen = _settled(proc, group, events, {"a", "b"}, after=gen)
            _assert_quiet(proc, group, events, gen)
            with member(third, bootstrap, group, topic, "c", events):
                gen = _settled(proc, group, events, {"a", "b", "c"}, after=gen)
                assert events.assigned.get("c"), events.log
            gen = _settled(proc, group, events, {"a", "b"}, after=gen)
            _assert_quiet(proc, group, events, gen)


@pytest.mark.slow  # ~3.5 s: four rebalances and two quiet windows
def test_kafka_python_group_settles_after_join_and_leave(
    broker_process: BrokerProcess, topic: str
) -> None:
    _join_and_leave(broker_process, topic, _kafka_python, _kafka_python, _kafka_python)


@pytest.mark.slow  # ~3.5 s: four rebalances and two quiet windows
def test_mixed_group_settles_kafka_python_leader(broker_process: BrokerProcess, topic: str) -> None:
    """kafka-python leads (it joins first); librdkafka members follow and one leaves."""
    _join_and_leave(broker_process, topic, _kafka_python, _confluent, _confluent)


@pytest.mark.slow  # ~3.5 s: four rebalances and two quiet windows
def test_mixed_group_settles_librdkafka_leader(broker_process: BrokerProcess, topic: str) -> None:
    """librdkafka leads; kafka-python members follow and one leaves."""
    _join_and_leave(broker_process, topic, _confluent, _kafka_python, _kafka_python)
