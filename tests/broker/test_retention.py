"""Background retention and compaction of a real ``seglog serve``, and DeleteRecords
(API 21) through confluent-kafka's AdminClient."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.protocol.admin import DeleteRecordsRequest
from tests._wait import wait_until
from tests.broker._wire import Wire, api_versions, ensure_topic, fetch_request, produce, values

from seglog.broker import BrokerProcess

OLD = 1_000_000_000_000  # a 2001 timestamp, older than any retention.ms used here


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config)])
    futures[topic].result(30)


def _produce(bootstrap: str, topic: str, n: int, *, keys: int = 0, ts: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        kwargs: dict[str, Any] = {"value": b"v%d-" % i + b"x" * 100}
        if keys:
            kwargs["key"] = b"k%d" % (i % keys)
        if ts is not None:
            kwargs["timestamp"] = ts + i
        producer.produce(topic, **kwargs)
        producer.poll(0)
    assert producer.flush(30) == 0


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def _consume_all(bootstrap: str, topic: str, offset: int, end: int) -> list[Any]:
    """Messages from ``offset`` until the one before ``end`` (the high watermark)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "retention-tests",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        out: list[Any] = []

        def poll_once() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            elif msg is not None:
                out.append(msg)
            return bool(out) and out[-1].offset() >= end - 1

        wait_until(poll_once, interval=0, message=lambda: f"{len(out)} messages, not to {end}")
        return out
    finally:
        consumer.close()


def _segments(data: Path, topic: str) -> list[str]:
    return sorted(f for f in os.listdir(data / f"{topic}-0") if f.endswith(".log"))


def test_background_retention_by_age_and_size(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(
        [
            "--log-segment-bytes", "2048",
            "--log-retention-check-interval-ms", "200",
            "--log-retention-ms", "60000",
        ]
    )  # fmt: skip
    bootstrap, data = broker.bootstrap, broker.data_dir
    # broker default retention.ms: records from 2001 are far too old
    _produce(bootstrap, "aged", 60, ts=OLD)
    wait_until(lambda: len(_segments(data, "aged")) == 1, interval=0.1)  # the active one left
    low, high = _watermarks(bootstrap, "aged")
    assert high == 60
    assert low == int(_segments(data, "aged")[0].split(".")[0]) > 0
    msgs = _consume_all(bootstrap, "aged", 0, high)  # reset to the new start
    assert [m.offset() for m in msgs] == list(range(low, high))
    # a topic config overrides the broker's: retention.bytes
    _create(bootstrap, "sized", {"retention.bytes": "4096", "retention.ms": "-1"})
    _produce(bootstrap, "sized", 120)

    def size() -> int:
        return sum(os.stat(data / "sized-0" / f).st_size for f in _segments(data, "sized"))

    wait_until(
        lambda: size() < 4096 + 2 * 2048, interval=0.1
    )  # within a segment of retention.bytes
    assert size() >= 4096
    assert _watermarks(bootstrap, "sized")[0] > 0
    # retention.ms -1 on a topic: nothing old is removed
    _create(bootstrap, "forever", {"retention.ms": "-1"})
    _produce(bootstrap, "forever", 60, ts=OLD)
    # a witness under the broker's retention.ms, produced after "forever" and sorted after
    # it (a pass visits topics by name): once a pass has trimmed the witness, that pass
    # has also visited "forever", with its 60 old records there
    _produce(bootstrap, "zz.witness", 60, ts=OLD)
    wait_until(lambda: "retention zz.witness-0" in broker.log_text(), interval=0.1)
    assert _watermarks(bootstrap, "forever") == (0, 60)
    assert "retention aged-0" in broker.log_text()


def test_background_compaction(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(
        ["--log-segment-bytes", "2048", "--log-retention-check-interval-ms", "200"]
    )
    bootstrap = broker.bootstrap
    _create(bootstrap, "table", {"cleanup.policy": "compact", "delete.retention.ms": "0"})
    _produce(bootstrap, "table", 150, keys=5)
    # logged once a pass has compacted records away (committed: the cleaned segments
    # replaced the old ones); later passes may clean more, never the latest per key
    compacted = r"retention table-0: \d+ segment\(s\) removed, [1-9]"
    wait_until(lambda: re.search(compacted, broker.log_text()), interval=0.1)
    low, high = _watermarks(bootstrap, "table")
    assert (low, high) == (0, 150)  # compaction never moves the log start or end
    msgs = _consume_all(bootstrap, "table", 0, 150)
    offsets = [m.offset() for m in msgs]
    assert len(offsets) < 150
    assert offsets == sorted(offsets)
    last = {m.key(): m.offset() for m in msgs}
    assert last == {b"k%d" % (i % 5): i for i in range(145, 150)}


def test_delete_records_with_confluent_admin(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    script = tmp_path / "archive.py"
    out = tmp_path / "archived"
    script.write_text(
        "import shutil, sys, pathlib\n"
        f"dest = pathlib.Path({str(out)!r})\n"
        "dest.mkdir(exist_ok=True)\n"
        "for f in sys.argv[3:]: shutil.move(f, dest / (sys.argv[1] + '.' + pathlib.Path(f).name))\n"
    )
    args = ["--log-segment-bytes", "2048", "--log-archive-command", f"{sys.executable} {script}"]
    broker = broker_factory(args)
    bootstrap = broker.bootstrap
    _produce(bootstrap, "dr", 100)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition("dr", 0, 42)])
    result = next(iter(futures.values())).result(30)
    assert result.low_watermark == 42
    assert _watermarks(bootstrap, "dr") == (42, 100)
    assert any(p.name.endswith(".log.bak") for p in out.iterdir())  # removed segments archived
    # a consumer starting below the low watermark gets OFFSET_OUT_OF_RANGE and resets
    msgs = _consume_all(bootstrap, "dr", 0, 100)
    assert [m.offset() for m in msgs] == list(range(42, 100))
    # beyond the high watermark: OFFSET_OUT_OF_RANGE
    futures = admin.delete_records([TopicPartition("dr", 0, 1000)])
    err = next(iter(futures.values())).exception(30)
    assert err is not None
    assert err.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    # the new log start survives a restart
    del admin  # its connection would hold the broker's shutdown
    assert broker.stop() == 0
    broker = broker_factory(args)
    assert _watermarks(broker.bootstrap, "dr") == (42, 100)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition("dr", 0, -1)])  # up to the high watermark
    assert next(iter(futures.values())).result(30).low_watermark == 100
    assert _watermarks(broker.bootstrap, "dr") == (100, 100)


def test_delete_records_each_version_raw(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    assert api_versions(broker.bootstrap)[21] == (0, 2)
    with Wire(broker.bootstrap) as w:
        ensure_topic(w, "raw")
        produce(w, "raw", [b"v%d" % i for i in range(30)])
        for version, target in ((0, 5), (1, 10), (2, 20)):
            req = DeleteRecordsRequest[version]
            topic = req.DeleteRecordsTopic(
                name="raw",
                partitions=[
                    req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=target),
                    req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=7, offset=1),
                ],
            )
            missing = req.DeleteRecordsTopic(
                name="nope",
                partitions=[
                    req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=1)
                ],
            )
            resp = w.call(req(topics=[topic, missing], timeout_ms=5000))
            ok, bad_partition = resp.topics[0].partitions
            assert (ok.error_code, ok.low_watermark) == (0, target)
            assert bad_partition.error_code == 3
            assert resp.topics[1].partitions[0].error_code == 3
        # a fetch below the low watermark: OFFSET_OUT_OF_RANGE with the log start offset
        part = w.call(fetch_request("raw", {0: 3})).responses[0].partitions[0]
        assert part.error_code == 1
        assert part.log_start_offset == 20
        part = w.call(fetch_request("raw", {0: 20})).responses[0].partitions[0]
        assert part.error_code == 0
        assert values(part.records)[-1] == b"v29"  # the whole batch, as Kafka sends it


def test_delete_records_negative_offset_on_a_missing_partition(broker: str, topic: str) -> None:
    """An offset below -1 is 1 OFFSET_OUT_OF_RANGE only where the partition exists: for an
    unknown topic or partition Kafka answers 3 first (ReplicaManager finds the partition
    before Partition.deleteRecordsOnLeader looks at the offset); it answered 1."""
    req = DeleteRecordsRequest[2]
    part = req.DeleteRecordsTopic.DeleteRecordsPartition
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"a", b"b"])
        resp = w.call(
            req(
                topics=[
                    req.DeleteRecordsTopic(
                        name=topic,
                        partitions=[
                            part(partition_index=0, offset=-5),
                            part(partition_index=9, offset=-5),
                        ],
                    ),
                    req.DeleteRecordsTopic(
                        name=f"{topic}-nope", partitions=[part(partition_index=0, offset=-5)]
                    ),
                ],
                timeout_ms=5000,
            )
        )
    here, missing_partition = resp.topics[0].partitions
    assert here.error_code == 1
    assert (missing_partition.error_code, missing_partition.low_watermark) == (3, -1)
    assert resp.topics[1].partitions[0].error_code == 3


def _commit(bootstrap: str, group: str, offsets: dict[str, int]) -> None:
    """Commit ``offsets`` (topic → offset of partition 0) for ``group`` in one request,
    without joining the group (a standalone commit, as an admin tool does)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        tps = [TopicPartition(t, 0, o) for t, o in offsets.items()]
        done = consumer.commit(offsets=tps, asynchronous=False)
        assert done is not None
        assert all(tp.error is None for tp in done), done
    finally:
        consumer.close()


def _two_passes(bootstrap: str, probe: str) -> None:
    """Return once a whole retention pass ran after the call: ``probe`` trims below g1's
    commits, so its earliest offset moving twice means two passes processed it after
    this call, and the second one started after the first ended."""
    for _ in range(2):
        low = _watermarks(bootstrap, probe)[0]
        _produce(bootstrap, probe, 40)
        _commit(bootstrap, "g1", {probe: _watermarks(bootstrap, probe)[1]})
        wait_until(lambda low=low: _watermarks(bootstrap, probe)[0] > low, interval=0.1)  # type: ignore[misc]


def test_retention_below_the_groups_committed_offsets(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory(
        ["--log-segment-bytes", "2048", "--log-retention-check-interval-ms", "100"]
    )
    bootstrap, data = broker.bootstrap, broker.data_dir
    consumed = {"seglog.retention.consumed": "true", "retention.ms": "-1"}
    _create(bootstrap, "eaten", {**consumed, "seglog.retention.consumed.groups": "g1,g2"})
    _create(bootstrap, "probe", {**consumed, "seglog.retention.consumed.groups": "g1"})
    _produce(bootstrap, "eaten", 150)
    segments = _segments(data, "eaten")
    bases = [int(f.split(".")[0]) for f in segments]
    assert len(bases) > 5
    # g1 far ahead, g2 has not committed: nothing goes
    _commit(bootstrap, "g1", {"eaten": 140})
    _two_passes(bootstrap, "probe")
    assert _watermarks(bootstrap, "eaten") == (0, 150)
    assert _segments(data, "eaten") == segments
    # g2 commits less: the earliest offset moves to g2's segment boundary, not past it
    g2 = bases[3] + 5
    _commit(bootstrap, "g2", {"eaten": g2})
    wait_until(lambda: _watermarks(bootstrap, "eaten")[0] != 0, interval=0.1)
    assert _watermarks(bootstrap, "eaten") == (bases[3], 150)
    _two_passes(bootstrap, "probe")
    assert _watermarks(bootstrap, "eaten") == (bases[3], 150)
    assert _segments(data, "eaten") == segments[3:]
    assert "retention eaten-0" in broker.log_text()
    # as after DeleteRecords: a fetch below it is OFFSET_OUT_OF_RANGE, consumers reset
    with Wire(bootstrap) as w:
        part = w.call(fetch_request("eaten", {0: 0})).responses[0].partitions[0]
        assert part.error_code == 1
        assert part.log_start_offset == bases[3]
    msgs = _consume_all(bootstrap, "eaten", 0, 150)
    assert [m.offset() for m in msgs] == list(range(bases[3], 150))
    # g2 catches up past g1: g1 is now the lowest
    _commit(bootstrap, "g2", {"eaten": 150})
    wait_until(lambda: _watermarks(bootstrap, "eaten")[0] != bases[3], interval=0.1)
    expected = max(b for b in bases if b <= 140)
    assert _watermarks(bootstrap, "eaten") == (expected, 150)


def test_consumed_retention_configs_are_validated(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # consumed=true without groups: refused, saying why
    futures = admin.create_topics(
        [NewTopic("nogroups", 1, 1, config={"seglog.retention.consumed": "true"})]
    )
    err = futures["nogroups"].exception(30)
    assert err is not None
    assert err.args[0].code() == KafkaError.INVALID_CONFIG
    assert "names no consumer group" in err.args[0].str()
    _create(broker.bootstrap, "withgroups", {"seglog.retention.consumed.groups": "a, b"})
    resource = ConfigResource("topic", "withgroups")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["seglog.retention.consumed"].value == "false"
    assert configs["seglog.retention.consumed.groups"].value == "a, b"

    def alter(*entries: tuple[str, str | None, AlterConfigOpType]) -> Any:
        res = ConfigResource(
            "topic",
            "withgroups",
            incremental_configs=[
                ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries
            ],
        )
        return admin.incremental_alter_configs([res])[res].exception(30)

    set_, subtract = AlterConfigOpType.SET, AlterConfigOpType.SUBTRACT
    err = alter(
        ("seglog.retention.consumed", "true", set_), ("seglog.retention.consumed.groups", "", set_)
    )
    assert err is not None
    assert "names no consumer group" in err.args[0].str()
    err = alter(("seglog.retention.consumed.groups", "a,,b", set_))
    assert err is not None
    assert err.args[0].code() == KafkaError.INVALID_CONFIG
    assert alter(("seglog.retention.consumed", "true", set_)) is None  # groups a, b
    # removing the last group while consumed=true is refused too
    assert alter(("seglog.retention.consumed.groups", "a", subtract)) is None
    err = alter(("seglog.retention.consumed.groups", "b", subtract))
    assert err is not None
    assert "names no consumer group" in err.args[0].str()
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["seglog.retention.consumed"].value == "true"
    assert configs["seglog.retention.consumed.groups"].value == "b"
