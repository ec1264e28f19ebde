"""``seglog topic ...``, ``seglog group ...`` and ``seglog cluster info`` against a real
``seglog serve``: each checked against what a Kafka client sees."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests._wait import wait_until

from .conftest import Seglog


def test_topic_lifecycle(seglog: Seglog, broker: str, topic: str) -> None:
    seglog("topic", "create", topic, "-p", "2", "-c", "retention.ms=60000")
    assert {"topic": topic, "partitions": 2, "error": None} in seglog.json("topic", "list")
    assert seglog("topic", "create", topic, check=False).returncode == 1  # exists

    producer = Producer({"bootstrap.servers": broker})
    for i in range(10):
        producer.produce(topic, value=b"x", partition=i % 2)
    assert producer.flush(30) == 0
    doc = seglog.json("topic", "describe", topic)
    assert [
        (p["partition"], p["log_start_offset"], p["log_end_offset"]) for p in doc["partitions"]
    ] == [
        (0, 0, 5),
        (1, 0, 5),
    ]
    assert doc["configs"]["retention.ms"] == {"value": "60000", "source": "DYNAMIC_TOPIC_CONFIG"}

    seglog(
        "topic",
        "alter-config",
        topic,
        "--set",
        "retention.ms=120000",
        "--set",
        "cleanup.policy=compact",
    )
    configs = seglog.json("topic", "describe", topic)["configs"]
    assert configs["retention.ms"]["value"] == "120000"
    assert configs["cleanup.policy"]["value"] == "compact"
    seglog("topic", "alter-config", topic, "--delete", "cleanup.policy")
    assert seglog.json("topic", "describe", topic)["configs"]["cleanup.policy"]["value"] == "delete"
    bad = seglog("topic", "alter-config", topic, "--set", "segment.bytes=tiny", check=False)
    assert bad.returncode == 1
    assert b"segment.bytes" in bad.stderr

    trimmed = seglog.json("topic", "trim-prefix", topic, "--offset", "3", "-p", "0")
    assert trimmed == [{"partition": 0, "log_start_offset": 3}]
    starts = [p["log_start_offset"] for p in seglog.json("topic", "describe", topic)["partitions"]]
    assert starts == [3, 0]

    seglog("topic", "add-partitions", topic, "--total", "4")
    assert len(seglog.json("topic", "describe", topic)["partitions"]) == 4

    seglog("topic", "delete", topic)
    assert topic not in {t["topic"] for t in seglog.json("topic", "list")}
    gone = seglog("topic", "describe", topic, check=False)
    assert gone.returncode == 1


def _group_with_commits(broker: str, topic: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    from confluent_kafka.admin import NewTopic  # noqa: PLC0415

    admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker})
    for i in range(20):
        producer.produce(topic, value=b"v", partition=i % 2, timestamp=1_700_000_000_000 + i * 1000)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 7)], asynchronous=False
    )
    consumer.close()


def test_group_describe_shows_real_lag(seglog: Seglog, broker: str, topic: str) -> None:
    group = f"{topic}-g"
    _group_with_commits(broker, topic, group)
    doc = seglog.json("group", "describe", group)
    rows = {(p["topic"], p["partition"]): p for p in doc["partitions"]}
    assert rows[(topic, 0)]["committed_offset"] == 4
    assert rows[(topic, 0)]["log_end_offset"] == 10
    assert rows[(topic, 0)]["lag"] == 6
    assert rows[(topic, 1)]["lag"] == 3
    assert doc["state"] == "EMPTY"
    assert doc["type"] == "classic"
    assert {"group": group, "type": "classic", "state": "EMPTY"} in seglog.json("group", "list")

    # a live member shows up with its assignment
    member = Consumer({"bootstrap.servers": broker, "group.id": group, "client.id": "cli-test"})
    member.subscribe([topic])
    try:

        def assigned() -> bool:
            if member.assignment():
                return True
            member.poll(0.2)
            return False

        wait_until(assigned, interval=0, message="the member got no assignment")
        doc = seglog.json("group", "describe", group)
        assert doc["state"] == "STABLE"
        assert [m["client_id"] for m in doc["members"]] == ["cli-test"]
        assert len(doc["members"][0]["assignment"]) == 2
        # seek refuses to execute while a member is live
        busy = seglog("group", "seek", group, "--to-earliest", "--execute", check=False)
        assert busy.returncode == 1
        assert b"live member" in busy.stderr
        assert seglog("group", "delete", group, check=False).returncode == 1  # not empty
    finally:
        member.close()


def test_group_list_and_describe_show_the_group_type(
    seglog: Seglog, broker: str, topic: str
) -> None:
    """A KIP-848 group (``group.protocol=consumer``) is listed and described as
    ``consumer``, with its member and assignment."""
    group = f"{topic}-kip848"
    admin = AdminClient({"bootstrap.servers": broker})  # alive until the future resolves
    admin.create_topics([NewTopic(topic, 2)])[topic].result(30)
    member = Consumer(
        {"bootstrap.servers": broker, "group.id": group, "group.protocol": "consumer"}
    )
    member.subscribe([topic])
    try:

        def assigned() -> bool:
            member.poll(0.1)
            return len(member.assignment()) == 2

        wait_until(assigned, interval=0, message="the member got no assignment")
        doc = seglog.json("group", "describe", group)
        assert (doc["type"], doc["state"]) == ("consumer", "STABLE")
        assert len(doc["members"][0]["assignment"]) == 2
        assert {"group": group, "type": "consumer", "state": "STABLE"} in seglog.json(
            "group", "list"
        )
        table = seglog("group", "list").stdout.decode()
        assert "consumer" in table
    finally:
        member.close()


def test_group_seek_dry_run_then_execute(seglog: Seglog, broker: str, topic: str) -> None:
    group = f"{topic}-g"
    _group_with_commits(broker, topic, group)

    def committed() -> dict[int, int]:
        doc = seglog.json("group", "describe", group)
        return {p["partition"]: p["committed_offset"] for p in doc["partitions"]}

    plan = seglog.json("group", "seek", group, "--to-earliest")
    assert plan["executed"] is False
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in plan["partitions"]] == [
        (0, 4, 0),
        (1, 7, 0),
    ]
    assert committed() == {0: 4, 1: 7}  # dry run changed nothing

    shifted = seglog.json("group", "seek", group, "--shift-by", "-2", "--execute")
    assert [p["new_offset"] for p in shifted["partitions"]] == [2, 5]
    assert committed() == {0: 2, 1: 5}
    seglog("group", "seek", group, "--shift-by", "100", "--execute")
    assert committed() == {0: 10, 1: 10}  # clamped to the log end
    # partition 0 holds even i: timestamps base+0, +2000, ...; +5000 → first is i=6 (offset 3)
    seglog("group", "seek", group, "--to-datetime", "2023-11-14T22:13:25+00:00", "--execute")
    assert committed() == {0: 3, 1: 2}
    seglog("group", "seek", group, "--to-offset", "1", "--topic", topic, "--execute")
    assert committed() == {0: 1, 1: 1}
    assert seglog("group", "seek", group, check=False).returncode == 2  # no --to option

    seglog("group", "delete", group)
    assert group not in {g["group"] for g in seglog.json("group", "list")}


def test_cluster_info(seglog: Seglog) -> None:
    doc = seglog.json("cluster", "info")
    assert doc["controller_id"] == 0
    assert [b["node_id"] for b in doc["brokers"]] == [0]
    assert doc["cluster_id"]
    table = seglog("cluster", "info").stdout.decode()
    assert "brokers" in table


@pytest.mark.slow  # ~30 s: librdkafka gives up on 127.0.0.1:1 only after its timeouts
def test_unreachable_broker_is_exit_1() -> None:
    done = Seglog("127.0.0.1:1")(
        "topic", "list", "-X", "socket.timeout.ms=2000", check=False, timeout=120
    )
    assert done.returncode == 1
    assert b"error" in done.stderr


def test_group_list_and_describe_show_a_share_group(
    seglog: Seglog, broker: str, topic: str
) -> None:
    """A KIP-932 share group (confluent-kafka's ShareConsumer, which its AdminClient does not
    list) is listed with type ``share`` beside a classic group, and described with its
    member, assignment and per partition the share-partition start offset, log end offset
    and lag (log end - start); empty once its consumer closes; then deleted."""
    from confluent_kafka import AcknowledgeType, ShareConsumer  # noqa: PLC0415
    from tests.broker._share import earliest  # noqa: PLC0415

    group, classic = f"{topic}-share", f"{topic}-classic"
    _group_with_commits(broker, topic, classic)  # 2 partitions, 10 records each
    earliest(broker, group)
    member = ShareConsumer(
        {
            "bootstrap.servers": broker,
            "group.id": group,
            "client.id": "cli-share",
            "share.acknowledgement.mode": "explicit",
        }
    )
    member.subscribe([topic])
    try:
        got: list[Any] = []

        def read_all() -> bool:
            for m in member.poll(0.2):
                assert m.error() is None, m.error()
                member.acknowledge(m, AcknowledgeType.ACCEPT)
                got.append(m)
            return len(got) >= 20

        wait_until(read_all, interval=0, message=lambda: f"read {len(got)} of 20 records")
        member.commit_sync(30)  # the acknowledgements, confirmed by the broker
        producer = Producer({"bootstrap.servers": broker})
        for _ in range(3):
            producer.produce(topic, value=b"new", partition=0)
        assert producer.flush(30) == 0

        listed = seglog.json("group", "list")
        assert {"group": group, "type": "share", "state": "STABLE"} in listed
        assert {"group": classic, "type": "classic", "state": "EMPTY"} in listed
        table = seglog("group", "list").stdout.decode()
        assert "share" in table
        assert "classic" in table

        doc = seglog.json("group", "describe", group)
        assert (doc["type"], doc["state"], doc["assignor"]) == ("share", "STABLE", "simple")
        (m,) = doc["members"]
        assert m["client_id"] == "cli-share"
        assert m["subscribed_topics"] == [topic]
        assert m["assignment"] == [
            {"topic": topic, "partition": 0},
            {"topic": topic, "partition": 1},
        ]
        assert [
            (p["partition"], p["start_offset"], p["log_end_offset"], p["lag"], p["member_ids"])
            for p in doc["partitions"]
        ] == [(0, 10, 13, 3, [m["member_id"]]), (1, 10, 10, 0, [m["member_id"]])]
        text = seglog("group", "describe", group).stdout.decode()
        assert f"{group}" in text
        assert "(share)" in text
        assert "start" in text
    finally:
        member.close()

    wait_until(
        lambda: {"group": group, "type": "share", "state": "EMPTY"} in seglog.json("group", "list"),
        message="the share group is not Empty after its consumer closed",
    )
    empty = seglog.json("group", "describe", group)
    assert (empty["state"], empty["members"]) == ("EMPTY", [])
    assert [(p["partition"], p["start_offset"], p["lag"]) for p in empty["partitions"]] == [
        (0, 10, 3),
        (1, 10, 0),
    ]
    refused = seglog("group", "seek", group, "--to-earliest", "--topic", topic, check=False)
    assert refused.returncode == 2
    assert b"share group" in refused.stderr
    seglog("group", "delete", group)
    assert group not in {g["group"] for g in seglog.json("group", "list")}
