"""Fetch long poll, size limits, and in-order pipelined responses on one connection."""

from __future__ import annotations

import select
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from seglog.broker import BrokerProcess

from ._observe import METRICS_ARGS, fetches_waiting, metrics_port, wait_fetches_waiting
from ._wire import Wire, ensure_topic, fetch_request, make_batch, produce, produce_request, values


def test_long_poll_woken_by_append(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(METRICS_ARGS)
    port, topic = metrics_port(proc), "long-poll"
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"old"])
    assert fetches_waiting(port) == 0

    with Wire(proc.bootstrap, timeout=30) as w:
        request = fetch_request(topic, {0: 1}, max_wait_ms=20_000)
        started = time.monotonic()
        w.send(request)
        # the broker reports the fetch parked (nothing new exists) before anything is
        # produced: the wake-up by the append is what this test exercises
        wait_fetches_waiting(port, 1, timeout=15)
        # parked means unanswered: no response (e.g. an early empty one) has been sent
        readable, _, _ = select.select([w.sock], [], [], 0)
        assert readable == []
        with Wire(proc.bootstrap) as other:
            produce(other, topic, [b"new"])
        resp = w.recv(request)
        elapsed = time.monotonic() - started
    part = resp.responses[0].partitions[0]
    assert values(part.records) == [b"new"]  # answered after the produce, with its data
    assert part.high_watermark == 2
    assert elapsed < 15  # woken by the append, not by the 20 s max wait
    assert fetches_waiting(port) == 0  # answered: out of the long poll


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


def test_max_bytes_zero_still_returns_first_batch(broker: str, topic: str) -> None:
    """KIP-74 as Kafka applies it: the first batch of the first non-empty partition comes
    back even with a request ``max_bytes`` of 0 (Kafka reads it with minOneMessage); an
    empty answer would leave the consumer polling forever."""
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"A" * 100])
        produce(w, topic, [b"B" * 100])
        resp = w.call(fetch_request(topic, {0: 0}, max_bytes=0, partition_max_bytes=0))
        assert values(resp.responses[0].partitions[0].records) == [b"A" * 100]


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
        silent: Any = produce_request(topic, make_batch([b"acks0"]))
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


@pytest.mark.parametrize("version", [4, 11, 12, 16, 18])
def test_records_spliced_unchanged_across_partitions_and_topics(
    broker_factory: Callable[..., BrokerProcess], version: int
) -> None:
    """Several partitions of two topics with data in one response (flexible and not):
    every partition's bytes are exactly the stored batches, sizes and offsets intact."""
    proc = broker_factory(["--num-partitions", "3"])
    stored: dict[tuple[str, int], bytes] = {}
    with Wire(proc.bootstrap) as w:
        ids = {name: ensure_topic(w, name) for name in ("s1", "s2")}
        for name in ids:
            for p in range(3):
                batch = make_batch([f"{name}-{p}-{i}".encode() * (p + 1) for i in range(5)])
                resp = w.call(produce_request(name, batch, partition=p))
                assert resp.responses[0].partition_responses[0].error_code == 0
                patched = bytearray(batch)
                patched[0:8] = b"\x00" * 8  # baseOffset 0: the first batch of the partition
                stored[(name, p)] = bytes(patched)
        req = FetchRequest[version]

        def part(p: int) -> Any:
            return req.FetchTopic.FetchPartition(
                partition=p,
                fetch_offset=0,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
                log_start_offset=-1,
                last_fetched_epoch=-1,
            )

        topics = [
            req.FetchTopic(topic_id=ids[name], partitions=[part(p) for p in range(3)])
            if version >= 13
            else req.FetchTopic(topic=name, partitions=[part(p) for p in range(3)])
            for name in ids
        ]
        resp = w.call(
            req(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=topics,
                forgotten_topics_data=[],
                rack_id="",
            )
        )
    got = {}
    for t, name in zip(resp.responses, ids, strict=True):
        for p in t.partitions:
            assert (p.error_code, p.high_watermark) == (0, 5)
            got[(name, p.partition_index)] = bytes(p.records)
    assert got == stored
