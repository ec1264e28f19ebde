"""``group.consumer.migration.policy`` against a real ``seglog serve``: an empty classic
group becomes a KIP-848 consumer group when a ``group.protocol=consumer`` member joins and
back when a classic member joins, committed offsets kept (no record lost or read twice
across either switch, also over a broker kill -9); groups with live members of the other
protocol are refused with Kafka's codes (69 / 23) and, where the policy would have allowed
Kafka's online conversion, a message and a broker WARNING that say seglog does not do it."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import JoinGroupRequest
from tests._wait import wait_until
from typer.testing import CliRunner

from seglog.broker import BrokerProcess, free_port, start_broker
from seglog.broker.protocol.messages.consumer_group import ConsumerGroupHeartbeatRequest
from seglog.cli import build_app

from ._wire import Wire, ensure_topic

HB: Any = ConsumerGroupHeartbeatRequest
BROKER_ARGS = (
    "--group-consumer-heartbeat-interval-ms", "500",
    "--group-consumer-session-timeout-ms", "6000",
)  # fmt: skip
PARTITIONS = 2


def _consumer(broker: str, group: str, protocol: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
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


def _heartbeat(w: Wire, group: str, topic: str) -> Any:
    return w.call(
        HB[0](
            group_id=group, member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[topic], topic_partitions=[],
        )
    )  # fmt: skip


def _join(w: Wire, group: str) -> Any:
    return w.call(
        JoinGroupRequest[9](
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            reason=None,
        )
    )  # fmt: skip


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


def test_live_groups_are_refused_loudly_under_the_default_policy(
    broker_factory: Any, topic: str
) -> None:
    """Default ``bidirectional``: Kafka would convert; seglog refuses with Kafka's codes
    and says why, in the heartbeat's error message and in broker WARNINGs."""
    proc = broker_factory()
    message, join_code = _live_refusals(proc, topic)
    assert message.startswith(f"Group {topic}-classic is not a consumer group.")
    assert "group.consumer.migration.policy=bidirectional allows the upgrade" in message
    assert join_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    log = proc.log_text()
    assert "WARNING" in log
    assert "ConsumerGroupHeartbeat refused" in log
    assert f"JoinGroup for consumer group '{topic}-consumer' refused" in log


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


def test_real_clients_see_the_refusal(broker: str, topic: str) -> None:
    """Not a silent failure for confluent-kafka either: a group.protocol=consumer member
    of a live classic group gets a fatal error (69), a classic member of a live consumer
    group gets 23 INCONSISTENT_GROUP_PROTOCOL from ``poll``."""
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
        assert all(c.assignment() for c in live)  # the live members keep their partitions
    finally:
        for c in live:
            c.close()


def test_live_groups_are_refused_as_kafka_under_disabled(broker_factory: Any, topic: str) -> None:
    """``disabled``: Kafka's own refusal text, no upgrade hint."""
    proc = broker_factory(extra_args=("--group-consumer-migration-policy", "disabled"))
    message, join_code = _live_refusals(proc, topic)
    assert message == f"Group {topic}-classic is not a consumer group."
    assert join_code == 23
    assert "ConsumerGroupHeartbeat refused" not in proc.log_text()


def test_unknown_policy_is_refused_at_start(tmp_path: Path) -> None:
    """A value outside Kafka's four stops ``seglog serve`` with a usage error."""
    args = ["serve", "--data-dir", str(tmp_path / "d"), "--group-consumer-migration-policy", "up"]
    result = CliRunner().invoke(build_app(), args, env={"COLUMNS": "300"})
    output = " ".join(result.output.replace("\u2502", " ").split())
    assert result.exit_code == 2, output
    expected = "group.consumer.migration.policy=up: not one of disabled, upgrade, downgrade"
    assert expected in output
    assert not (tmp_path / "d").exists()
