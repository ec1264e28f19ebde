"""``seglog produce`` / ``seglog consume`` round trips against a real ``seglog serve``."""

from __future__ import annotations

import base64
import json
import signal
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests._wait import wait_until

from .conftest import SEGLOG, Seglog


def _create(broker: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def test_lines_round_trip_with_keys_and_headers(seglog: Seglog, broker: str, topic: str) -> None:
    _create(broker, topic)
    lines = [f"k{i}:value {i}" for i in range(50)]
    acks = seglog.json_lines(
        "produce", topic, "-K", ":", "-H", "source=test", "-H", "n=1",
        stdin="\n".join(lines).encode() + b"\n",
    )  # fmt: skip
    assert [a["offset"] for a in acks] == list(range(50))
    out = seglog("consume", topic, "-e", "-f", "%o|%k|%v|%h\\n").stdout.decode()
    assert out.splitlines() == [f"{i}|k{i}|value {i}|source=test,n=1" for i in range(50)]
    records = seglog.json_lines("consume", topic, "-e", "-c", "3")
    assert [r["key"] for r in records] == ["k0", "k1", "k2"]
    assert records[0]["headers"] == [{"key": "source", "value": "test"}, {"key": "n", "value": "1"}]
    assert records[0]["partition"] == 0
    assert records[0]["timestamp"] > 0


def test_binary_values_survive(seglog: Seglog, broker: str, topic: str) -> None:
    _create(broker, topic)
    # every byte value but the delimiter (NUL here), in one record, and invalid UTF-8
    payload = bytes(range(1, 256))
    seglog("produce", topic, "-D", "\\0", stdin=payload + b"\0" + b"\xff\xfe" + b"\0")
    raw = seglog("consume", topic, "-e", "-f", "%v\\0").stdout
    assert raw == payload + b"\0" + b"\xff\xfe" + b"\0"
    records = seglog.json_lines("consume", topic, "-e")
    assert records[0]["value_encoding"] == "base64"
    assert base64.b64decode(records[0]["value"]) == payload
    # what the CLI wrote, another client reads byte for byte
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"{topic}-check"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = consumer.poll(10)
        assert msg is not None
        assert msg.value() == payload
    finally:
        consumer.close()


def test_json_input_and_partitions(seglog: Seglog, broker: str, topic: str) -> None:
    _create(broker, topic, partitions=3)
    docs = [
        {"key": "a", "value": {"n": 1}, "headers": {"h": "x"}, "partition": 2},
        {"key": None, "value": "plain", "partition": 0},
    ]
    stdin = "\n".join(json.dumps(d) for d in docs).encode()
    acks = seglog.json_lines("produce", topic, "--json-input", stdin=stdin)
    assert sorted(a["partition"] for a in acks) == [0, 2]
    only2 = seglog.json_lines("consume", topic, "-p", "2", "-e")
    assert [(r["key"], json.loads(r["value"])) for r in only2] == [("a", {"n": 1})]
    assert only2[0]["headers"] == [{"key": "h", "value": "x"}]
    assert seglog("produce", topic, "--json-input", stdin=b"not json", check=False).returncode == 2


def test_offset_specs(seglog: Seglog, broker: str, topic: str) -> None:
    _create(broker, topic)
    producer = Producer({"bootstrap.servers": broker})
    base_ms = 1_700_000_000_000
    for i in range(10):
        producer.produce(topic, value=str(i).encode(), timestamp=base_ms + i * 1000)
    assert producer.flush(30) == 0

    def values(spec: str) -> list[str]:
        return seglog("consume", topic, "-o", spec, "-e").stdout.decode().split()

    assert values("beginning") == [str(i) for i in range(10)]
    assert values("7") == ["7", "8", "9"]
    assert values("-2") == ["8", "9"]
    assert values(f"@{base_ms + 4000}") == ["4", "5", "6", "7", "8", "9"]
    assert values(f"s@{base_ms + 8500}") == ["9"]
    assert values("end") == []
    assert seglog("consume", topic, "-o", "sideways", check=False).returncode == 2
    missing = seglog("consume", topic, "-p", "5", "-e", check=False)
    assert missing.returncode == 2
    assert b"no partition" in missing.stderr


def test_group_mode_commits_and_ctrl_c_leaves(seglog: Seglog, broker: str, topic: str) -> None:
    _create(broker, topic)
    seglog("produce", topic, stdin=b"".join(b"v%d\n" % i for i in range(20)))
    group = f"{topic}-g"
    first = seglog("consume", topic, "-G", group, "-c", "5").stdout.split()
    assert first == [b"v%d" % i for i in range(5)]
    rest = seglog("consume", topic, "-G", group, "-e").stdout.split()
    assert rest == [b"v%d" % i for i in range(5, 20)]  # resumed from the committed offset

    # Ctrl-C: exit 0, the member leaves (the group is empty again at once)
    proc = subprocess.Popen(
        [*SEGLOG, "consume", topic, "-G", group, "-b", broker],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    admin = AdminClient({"bootstrap.servers": broker})
    wait_until(
        lambda: admin.describe_consumer_groups([group])[group].result(10).members,
        interval=0.05,
        message="the consumer never joined",
    )
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    desc = admin.describe_consumer_groups([group])[group].result(10)
    assert not desc.members
