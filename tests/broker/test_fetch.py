"""Fetch long poll, size limits, and in-order pipelined responses on one connection."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.record.memory_records import MemoryRecords

from ._wire import Wire, make_batch
from .test_bad_input import produce_request
from .test_protocol_versions import ensure_topic, produce


def fetch_request(
    topic: str,
    offsets: dict[int, int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
) -> Any:
    req = FetchRequest[12]
    parts = [
        req.FetchTopic.FetchPartition(
            partition=p,
            fetch_offset=o,
            partition_max_bytes=partition_max_bytes,
            current_leader_epoch=-1,
            log_start_offset=-1,
            last_fetched_epoch=-1,
        )
        for p, o in offsets.items()
    ]
    return req(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[req.FetchTopic(topic=topic, partitions=parts)],
        forgotten_topics_data=[],
        rack_id="",
    )


def values(records: bytes) -> list[bytes]:
    return [r.value for batch in MemoryRecords(records) for r in batch]


def test_long_poll_woken_by_append(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"old"])

    def later() -> None:
        time.sleep(0.5)
        with Wire(broker) as other:
            produce(other, topic, [b"new"])

    thread = threading.Thread(target=later)
    with Wire(broker, timeout=30) as w:
        started = time.monotonic()
        thread.start()
        resp = w.call(fetch_request(topic, {0: 1}, max_wait_ms=20_000))
        elapsed = time.monotonic() - started
    thread.join()
    part = resp.responses[0].partitions[0]
    assert values(part.records) == [b"new"]
    assert part.high_watermark == 2
    assert elapsed < 15  # woken by the append, not by the 20 s max wait


def test_long_poll_times_out_empty(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        resp = w.call(fetch_request(topic, {0: 0}, max_wait_ms=200))
    part = resp.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.records) == (0, 0, b"")


def test_min_bytes_waits_for_more(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"a"])
        # 1 batch (< 10 kB) is available: the broker waits out max_wait, then returns it
        resp = w.call(fetch_request(topic, {0: 0}, max_wait_ms=300, min_bytes=10_000))
    assert values(resp.responses[0].partitions[0].records) == [b"a"]


def test_max_bytes_first_batch_always_returned(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        for i in range(5):
            produce(w, topic, [bytes([65 + i]) * 1000])
        one = w.call(fetch_request(topic, {0: 0}, max_bytes=10, partition_max_bytes=10))
        assert values(one.responses[0].partitions[0].records) == [b"A" * 1000]
        three = w.call(fetch_request(topic, {0: 0}, max_bytes=3300))
        assert len(values(three.responses[0].partitions[0].records)) == 3


def test_unknown_topic_and_partition(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        resp = w.call(fetch_request(topic, {0: 0, 5: 0}, max_wait_ms=5000))
        missing = w.call(fetch_request("never-created", {0: 0}, max_wait_ms=5000))
    assert [p.error_code for p in resp.responses[0].partitions] == [0, 3]
    assert missing.responses[0].partitions[0].error_code == 3


def test_pipelined_responses_keep_request_order(broker: str, topic: str) -> None:
    """A long-polling fetch, then a metadata request, then an acks=0 produce and a produce
    on one connection: answers come back in request order; acks=0 gets none."""
    with Wire(broker, timeout=30) as w:
        ensure_topic(w, topic)
        fetch = fetch_request(topic, {0: 0}, max_wait_ms=1000, min_bytes=1 << 20)
        meta = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        silent = produce_request(topic, make_batch([b"acks0"]))
        silent.acks = 0
        acked = produce_request(topic, make_batch([b"acks-1"]))
        sent = [w.send(fetch), w.send(meta), w.send(silent), w.send(acked)]
        got = [struct.unpack_from(">i", w.recv_frame(), 0)[0] for _ in range(3)]
        assert got == [sent[0], sent[1], sent[3]]
        resp = w.call(fetch_request(topic, {0: 0}))
        assert values(resp.responses[0].partitions[0].records) == [b"acks0", b"acks-1"]
