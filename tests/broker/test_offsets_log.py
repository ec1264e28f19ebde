"""Committed offsets live in the internal compacted log ``__consumer_offsets``: each commit
is one fsynced append answered after its fsync, rebuilt on start, never going back across
a kill -9; the topic is internal (listed as such, refused to producers and deletes)."""

from __future__ import annotations

import json
import logging
import signal
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from seglog.broker import BrokerProcess
from seglog.broker.coordinator.committed import (
    CommittedOffsets,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from seglog.storage import OFFSET_OLDEST, DataDir, open_log

from ._wire import Wire


def _committed(bootstrap: str, group: str, topic: str, partitions: int = 1) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(tps, timeout=10)]
    finally:
        consumer.close()


def test_each_commit_is_a_record_rebuilt_on_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("orders", 2)])["orders"].result(10)
    consumer = Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    for offset in (3, 7):
        consumer.commit(
            offsets=[TopicPartition("orders", 0, offset), TopicPartition("orders", 1, offset * 2)],
            asynchronous=False,
        )
    consumer.close()
    assert proc.stop() == 0

    # what the log holds: Kafka's OffsetCommitKey/Value records, one batch per commit
    with open_log(proc.data_dir / "__consumer_offsets-0", read_only=True) as plog:
        _next, messages = plog.consume(OFFSET_OLDEST, 100)
    decoded = [(decode_key(m.key or b""), decode_value(m.value or b"")[0]) for m in messages]
    assert decoded == [
        (("g", "orders", 0), 3),
        (("g", "orders", 1), 6),
        (("g", "orders", 0), 7),
        (("g", "orders", 1), 14),
    ]
    again = broker_factory(data=proc.data_dir)
    assert _committed(again.bootstrap, "g", "orders", 2) == [7, 14]


def test_commits_never_go_back_across_kill_9(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("k9", 1)])["k9"].result(10)
    acknowledged = [0]
    stop = threading.Event()

    def committer() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": proc.bootstrap,
                "group.id": "k9g",
                "enable.auto.commit": False,
                "socket.timeout.ms": 2000,  # a commit to the killed broker fails fast
                "log_level": 0,
            }
        )
        offset = 0
        try:
            while not stop.is_set():
                offset += 1
                try:
                    consumer.commit(offsets=[TopicPartition("k9", 0, offset)], asynchronous=False)
                except KafkaException:
                    return  # the broker died mid-commit: not acknowledged
                acknowledged[0] = offset
        finally:
            consumer.close()

    # a daemon: after the kill its last commit may block in librdkafka's retries; what it
    # acknowledged before the kill is all the test reads
    thread = threading.Thread(target=committer, daemon=True)
    thread.start()
    try:
        # let some commits through, then kill the broker without warning
        deadline_ok = threading.Event()
        for _ in range(200):
            if acknowledged[0] >= 50:
                deadline_ok.set()
                break
            stop.wait(0.05)
        assert deadline_ok.is_set(), "commits did not get through"
        proc.process.send_signal(signal.SIGKILL)
        proc.process.wait(10)
    finally:
        stop.set()
        thread.join(5)
    proc.returncode = 0  # killed on purpose: the fixture must not fail on it
    last = acknowledged[0]
    again = broker_factory(data=proc.data_dir)
    restored = _committed(again.bootstrap, "k9g", "k9")[0]
    assert restored >= last, (restored, last)


def test_legacy_json_offsets_move_into_the_log(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("old", 1)])["old"].result(10)
    assert proc.stop() == 0
    legacy = proc.data_dir / "consumer-offsets.json"
    legacy.write_text(json.dumps({"oldgroup": {"old": {"0": [42, "meta"]}}}))
    again = broker_factory(data=proc.data_dir)
    assert not legacy.exists()
    assert _committed(again.bootstrap, "oldgroup", "old") == [42]


def test_the_offsets_topic_is_internal(broker: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    meta = admin.list_topics(timeout=10)
    assert "__consumer_offsets" in meta.topics
    producer = Producer({"bootstrap.servers": broker, "message.send.max.retries": 0})
    errors: list[object] = []
    producer.produce(
        "__consumer_offsets", value=b"forged", on_delivery=lambda e, _m: errors.append(e)
    )
    producer.flush(10)
    assert errors
    assert errors[0] is not None
    assert errors[0].code() == 17  # type: ignore[attr-defined]
    with pytest.raises(KafkaException) as info:
        admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(10)
    assert info.value.args[0].code() == 17


# -- malformed records: the bounded reader's error, never short data ------------------------

_KEY = encode_key("g", "orders", 7)  # version 1 | "g" | "orders" | partition 7
_VALUE = encode_value(42, "meta", 1_700_000_000_000)  # v3 | offset | epoch | "meta" | time


def _str16(raw: bytes, length: int | None = None) -> bytes:
    return struct.pack(">h", len(raw) if length is None else length) + raw


MALFORMED_KEYS = {
    "empty": b"",
    "truncated version": b"\x00",
    "unknown version": struct.pack(">h", 2) + _KEY[2:],
    "truncated group length": struct.pack(">h", 1) + b"\x00",
    "truncated group string": struct.pack(">h", 1) + _str16(b"gr", 5),
    "oversize group length": struct.pack(">h", 1) + _str16(b"g", 0x7FFF),
    "null group": struct.pack(">h", 1) + _str16(b"", -1) + _str16(b"orders") + b"\0\0\0\7",
    "non-UTF-8 group": struct.pack(">h", 1) + _str16(b"\xff") + _str16(b"orders") + b"\0\0\0\7",
    "truncated topic string": struct.pack(">h", 1) + _str16(b"g") + _str16(b"ord", 6),
    "oversize topic length": struct.pack(">h", 1) + _str16(b"g") + _str16(b"orders\0\0\0\7", 99),
    "truncated partition": _KEY[:-1],
}

_V3_HEAD = struct.pack(">hqi", 3, 42, -1)  # version, offset, leader epoch
MALFORMED_VALUES = {
    "empty": b"",
    "unknown version": struct.pack(">h", 4) + _VALUE[2:],
    "truncated offset": _VALUE[:6],
    "truncated leader epoch": _VALUE[:12],
    "truncated metadata length": _VALUE[:15],
    "truncated metadata string": _VALUE[:18],
    "oversize metadata length": _V3_HEAD + _str16(b"meta", 0x7FFF) + _VALUE[-8:],
    "non-UTF-8 metadata": _V3_HEAD + _str16(b"\xff\xfe") + _VALUE[-8:],
    "truncated commit timestamp": _VALUE[:-1],
    "missing commit timestamp": _VALUE[:-8],
}


def test_offset_commit_records_round_trip() -> None:
    assert decode_key(_KEY) == ("g", "orders", 7)
    assert decode_key(struct.pack(">h", 0) + _KEY[2:]) == ("g", "orders", 7)  # v0 key
    assert decode_value(_VALUE) == (42, "meta")
    assert decode_value(encode_value(5, None, 0)) == (5, "")


@pytest.mark.parametrize("data", MALFORMED_KEYS.values(), ids=MALFORMED_KEYS.keys())
def test_malformed_offset_commit_key_is_an_error(data: bytes) -> None:
    with pytest.raises(ValueError, match="offset commit key"):
        decode_key(data)


@pytest.mark.parametrize("data", MALFORMED_VALUES.values(), ids=MALFORMED_VALUES.keys())
def test_malformed_offset_commit_value_is_an_error(data: bytes) -> None:
    with pytest.raises(ValueError, match="offset commit value"):
        decode_value(data)


def _append(offsets: CommittedOffsets, records: list[tuple[bytes, bytes]]) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )  # fmt: skip
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=0, key=key, value=value, headers=[])
    offsets.log.append(bytes(builder.build()))
    offsets.log.sync()


def test_replay_skips_malformed_records_and_keeps_every_good_commit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A record the reader rejects is skipped with a warning naming it (the documented
    recovery): the commits before and after it stay, and the log is left as it was."""
    data = tmp_path / "data"
    with DataDir(data, create=True) as dd:
        offsets = CommittedOffsets(dd)
        _append(offsets, [(_KEY, _VALUE), (encode_key("g", "orders", 8), encode_value(9, "", 0))])
        bad = [(k, _VALUE) for k in MALFORMED_KEYS.values() if k]
        bad += [(_KEY, v) for v in MALFORMED_VALUES.values()]  # would take partition 7 back
        _append(offsets, bad)
        _append(offsets, [(encode_key("h", "orders", 0), encode_value(3, "x", 0))])
        end = offsets.log.log_end_offset
    with caplog.at_level(logging.WARNING), DataDir(data) as dd:
        offsets = CommittedOffsets(dd)
        assert offsets.get("g", "orders", 7) == (42, "meta")
        assert offsets.get("g", "orders", 8) == (9, "")
        assert offsets.get("h", "orders", 0) == (3, "x")
        assert sorted(offsets.groups()) == ["g", "h"]
        assert offsets.log.log_end_offset == end  # nothing appended or rewritten
    skipped = [r for r in caplog.records if "skipping record" in r.getMessage()]
    assert len(skipped) == len(bad)


# -- only decodable records are written -----------------------------------------------------


def _commit_with_metadata(w: Wire, group: str, metadata: str, offset: int) -> int:
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
        committed_metadata=metadata,
    )  # fmt: skip
    req = OffsetCommitRequest[8](  # flexible: metadata strings past int16's 32767 bytes
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="orders", partitions=[part])],
    )
    return int(w.call(req).topics[0].partitions[0].error_code)


def test_oversize_metadata_is_refused_before_it_is_written(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """Kafka's ``offset.metadata.max.bytes`` (4096): a longer commit metadata gets 12
    OFFSET_METADATA_TOO_LARGE and is not written (metadata past 32767 bytes could not be
    encoded in the record's int16 string at all); the connection keeps serving, the last
    good commit stays, and every record of ``__consumer_offsets`` decodes: so compaction,
    which keeps the last record of each key, never drops a commit for a record the loader
    cannot read."""
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("orders", 1)])["orders"].result(10)
    with Wire(proc.bootstrap) as w:
        assert _commit_with_metadata(w, "g", "ok", 3) == 0
        assert _commit_with_metadata(w, "g", "x" * 4096, 4) == 0
        assert _commit_with_metadata(w, "g", "x" * 4097, 9) == 12
        assert _commit_with_metadata(w, "g", "é" * 20_000, 9) == 12  # 40000 UTF-8 bytes
        assert _commit_with_metadata(w, "g" * 40_000, "", 9) == 24  # no int16 string holds it
        topic_req = OffsetFetchRequest.OffsetFetchRequestTopic(name="orders", partition_indexes=[0])
        fetched = w.call(OffsetFetchRequest[5](group_id="g", topics=[topic_req]))
        part = fetched.topics[0].partitions[0]
        assert (part.committed_offset, part.metadata) == (4, "x" * 4096)
    assert proc.stop() == 0
    with open_log(proc.data_dir / "__consumer_offsets-0", read_only=True) as plog:
        _next, messages = plog.consume(OFFSET_OLDEST, 100)
    decoded = [(decode_key(m.key or b""), decode_value(m.value or b"")) for m in messages]
    assert decoded == [(("g", "orders", 0), (3, "ok")), (("g", "orders", 0), (4, "x" * 4096))]


def test_a_string_too_long_for_a_record_is_refused_before_appending(tmp_path: Path) -> None:
    """The last defence behind OffsetCommit's checks: ValueError, nothing appended."""
    with DataDir(tmp_path / "data", create=True) as dd:
        offsets = CommittedOffsets(dd)
        end = offsets.log.log_end_offset
        for group, metadata in (("g" * 0x8000, ""), ("g", "x" * 0x8000)):
            with pytest.raises(ValueError, match="does not fit"):
                offsets.commit(group, {("orders", 0): (1, metadata)})
        assert offsets.log.log_end_offset == end
        assert offsets.groups() == []
