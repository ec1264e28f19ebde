"""Fetch long poll, size limits, and in-order pipelined responses on one connection."""

from __future__ import annotations

import struct
import threading
import time

from kafka.protocol.metadata import MetadataRequest

from ._wire import Wire, ensure_topic, fetch_request, make_batch, produce, produce_request, values


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


def test_disconnect_while_waiting_for_fsync(broker: str, topic: str) -> None:
    """Clients that vanish with produces in flight leave the partition working."""
    with Wire(broker) as w:
        ensure_topic(w, topic)
    for _ in range(20):
        w = Wire(broker)
        for _ in range(5):
            w.send(produce_request(topic, make_batch([b"gone?"] * 10)))
        w.close()
    with Wire(broker) as w:
        base = produce(w, topic, [b"after"])
        assert base % 10 == 0  # whole batches of 10 before it, none torn
        resp = w.call(fetch_request(topic, {0: base}))
    assert values(resp.responses[0].partitions[0].records) == [b"after"]
