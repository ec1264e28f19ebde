"""Limits a small broker must bound, against a real ``seglog serve`` over real sockets:
connections in total and per IP, idle connections, requests queued per connection,
array counts and record counts. Each limit takes effect, the broker keeps serving
everybody else, and no stored byte changes."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from tests._wait import wait_until

from seglog.broker import BrokerProcess
from seglog.broker.protocol.bounds import WALK_ABOVE_BYTES

from ._observe import METRICS_ARGS, metric, metrics_port, wait_fetches_waiting
from ._wire import (
    Wire,
    api_versions,
    ensure_topic,
    fetch_request,
    make_batch,
    produce,
    produce_request,
    tree_digest,
    values,
)


def answers(w: Wire) -> bool:
    """The connection gets an ApiVersions answer."""
    return (
        int(
            w.call(
                ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
            ).error_code
        )
        == 0
    )


def wire_from(bootstrap: str, source_ip: str) -> Wire:
    """A Wire whose socket is bound to ``source_ip`` (any 127.x.y.z is loopback)."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), 10, source_address=(source_ip, 0))
    w = Wire.__new__(Wire)
    w.sock, w.correlation_id = sock, 0
    return w


def high_watermark(bootstrap: str, topic: str) -> int:
    with Wire(bootstrap) as w:
        resp = w.call(fetch_request(topic, {0: 0}))
    return int(resp.responses[0].partitions[0].high_watermark)


def test_max_connections(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(["--max-connections", "3"])
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, "kept")
        produce(w, "kept", [b"before"])
    digest = tree_digest(proc.data_dir)
    held = [Wire(proc.bootstrap) for _ in range(3)]
    try:
        assert all(answers(w) for w in held)
        with Wire(proc.bootstrap) as extra:  # the 4th: closed at accept
            extra.assert_closed()
        assert all(answers(w) for w in held)  # the others are still served
        assert produce(held[0], "kept", [b"while full"]) == 1
        held.pop().close()

        def answered() -> bool:
            with Wire(proc.bootstrap) as again:
                assert answers(again)
                return True

        # the broker sees the close asynchronously: refused until then
        wait_until(answered, timeout=10, interval=0.1, ignore=(ConnectionError, OSError))
    finally:
        for w in held:
            w.close()
    assert high_watermark(proc.bootstrap, "kept") == 2
    assert "max.connections 3 reached" in proc.log_text()
    assert set(tree_digest(proc.data_dir)) == set(digest)  # no file added or removed


def test_max_connections_per_ip(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(["--max-connections-per-ip", "2"])
    with Wire(proc.bootstrap) as w:
        ensure_topic(w, "t")
    digest = tree_digest(proc.data_dir)
    first = [wire_from(proc.bootstrap, "127.0.0.1"), wire_from(proc.bootstrap, "127.0.0.1")]
    try:
        assert all(answers(w) for w in first)
        refused = wire_from(proc.bootstrap, "127.0.0.1")
        refused.assert_closed()
        refused.close()
        # another address is not affected by 127.0.0.1 being at its limit
        with wire_from(proc.bootstrap, "127.0.0.2") as other:
            assert answers(other)
            with wire_from(proc.bootstrap, "127.0.0.2") as other2:
                assert answers(other2)
        assert all(answers(w) for w in first)
    finally:
        for w in first:
            w.close()
    assert "max.connections.per.ip 2 reached" in proc.log_text()
    assert tree_digest(proc.data_dir) == digest


def test_idle_connections_closed(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(["--connections-max-idle-ms", "1000"])
    with (
        Wire(proc.bootstrap, timeout=30) as busy_w,
        Wire(proc.bootstrap) as idle_w,
        Wire(proc.bootstrap) as chatty,
    ):
        ensure_topic(busy_w, "idle")
        assert answers(idle_w)
        # a long poll longer than the idle limit is in flight: not idle
        busy_w.send(fetch_request("idle", {0: 0}, max_wait_ms=3000, min_bytes=1 << 20))
        for _ in range(10):  # a connection with traffic every 200 ms stays open
            assert answers(chatty)
            time.sleep(0.2)
        idle_w.assert_closed(timeout=5)
        frame = busy_w.recv_frame()  # answered after its max wait, connection kept
        assert struct.unpack_from(">i", frame, 0)[0] == busy_w.correlation_id
        assert answers(busy_w)
    with Wire(proc.bootstrap) as fresh:  # the broker serves new connections as before
        assert answers(fresh)
    assert "idle for 1.0 s" in proc.log_text()


def test_queued_max_requests_pauses_reading(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    """With 2 requests in flight on a connection the broker reads no further request from
    it (a produce behind two long polls is not appended) until one is answered."""
    proc = broker_factory(["--queued-max-requests", "2", *METRICS_ARGS])
    port = metrics_port(proc)
    with Wire(proc.bootstrap, timeout=30) as w:
        ensure_topic(w, "q")
        polls = [
            w.send(fetch_request("q", {0: 0}, max_wait_ms=4000, min_bytes=1 << 20))
            for _ in range(2)
        ]
        queued = w.send(produce_request("q", make_batch([b"queued"])))
        # both polls read and parked: the produce behind them, sent before they parked, is
        # in the broker's socket buffer; had the broker read on, it would have appended it
        # before the metrics (answered on the same event loop) showed the polls parked
        wait_fetches_waiting(port, 2)
        end = {"topic": "q", "partition": "0"}
        assert metric(port, "seglog_log_end_offset", end) == 0  # not read yet
        assert high_watermark(proc.bootstrap, "q") == 0
        got = [struct.unpack_from(">i", w.recv_frame(), 0)[0] for _ in range(3)]
        assert got == [*polls, queued]
        assert high_watermark(proc.bootstrap, "q") == 1
        resp = w.call(fetch_request("q", {0: 0}))
    assert values(resp.responses[0].partitions[0].records) == [b"queued"]


def test_huge_array_count_closes_before_decoding(broker: str, topic: str, data_dir: Path) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"x"])
    digest = tree_digest(data_dir)
    header = struct.pack(">hhih", 3, 12, 1, 1) + b"c" + b"\x00"  # Metadata v12, flexible
    pad = b"\x00" * (WALK_ABOVE_BYTES + 100)  # large enough to be walked before decoding
    bodies = [
        b"\xff\xff\xff\xff\x07" + pad,  # topics: 2^31-2 elements
        b"\x81\x80\x04" + pad,  # 65,536 topics claimed, ~4 KiB follow
    ]
    for body in bodies:
        with Wire(broker) as w:
            w.send_frame(header + body)
            w.assert_closed()
    # a request with more array elements than MAX_ARRAY_ELEMENTS, each really present
    many = MetadataRequest[9](
        topics=[MetadataRequest.MetadataRequestTopic(name="") for _ in range(100_001)],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    with Wire(broker) as w:
        w.send(many)
        w.assert_closed()
    with Wire(broker) as w:
        assert answers(w)
        resp = w.call(fetch_request(topic, {0: 0}))
    assert values(resp.responses[0].partitions[0].records) == [b"x"]
    assert tree_digest(data_dir) == digest


def test_record_count_bounded(broker: str, topic: str, data_dir: Path) -> None:
    """A compressed batch claiming 2^31-1 records (CRC valid) is refused with 87
    INVALID_RECORD: it would take two billion offsets."""
    with Wire(broker) as w:
        ensure_topic(w, topic)
        produce(w, topic, [b"x"])
    digest = tree_digest(data_dir)
    batch = bytearray(make_batch([b"v"] * 10, compression=1))  # gzip
    struct.pack_into(">i", batch, 23, 2**31 - 2)  # lastOffsetDelta
    struct.pack_into(">i", batch, 57, 2**31 - 1)  # recordCount
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with Wire(broker) as w:
        resp = w.call(produce_request(topic, bytes(batch)))
        assert resp.responses[0].partition_responses[0].error_code == 87
        assert tree_digest(data_dir) == digest
        assert produce(w, topic, [b"y"]) == 1  # offsets untouched, connection open


SLOW_ARGS = ("--max-connections", "20", "--partial-request-timeout-ms", "1500")


def test_stalled_partial_requests_are_closed_and_others_served(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory(list(SLOW_ARGS))
    stalled = []
    for _ in range(20):  # every slot: two bytes of a frame size, then nothing
        s = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
        s.sendall(b"\x00\x00")
        stalled.append(s)
    try:
        for s in stalled:  # each is closed once its request is 1.5 s late
            s.settimeout(15)
            with contextlib.suppress(ConnectionResetError):
                assert s.recv(16) == b""
        assert 3 in api_versions(proc.bootstrap)  # a well-behaved client is served again
    finally:
        for s in stalled:
            s.close()
    assert "is still incomplete" in proc.log_text()
