"""The raw producer's Produce requests: the record batch spliced in by
``Connection.send(request, tail)`` gives the bytes kafka-python's encoder gives."""

from __future__ import annotations

import socket
import struct
import threading
from collections import deque

from kafka.protocol.producer import ProduceRequest

from seglog.spark._fetch import Connection


def _request(records: bytes) -> object:
    req = ProduceRequest[8]
    data = req.TopicProduceData.PartitionProduceData(index=3, records=records)
    return req(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[req.TopicProduceData(name="topic-a", partition_data=[data])],
    )


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            got = sock.recv(n - len(buf))
            assert got
            buf += got
        return bytes(buf)

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_spliced_records_equal_the_encoders_bytes() -> None:
    ours, theirs = socket.socketpair()
    try:
        conn = Connection.__new__(Connection)  # a connected socket, no broker handshake
        conn.client_id, conn.correlation_id, conn._sent, conn.sock = "cid", 0, deque(), ours
        # larger than the socket buffers: sendmsg sends it in parts while we read
        tail = bytes(range(256)) * 12_000
        frames: list[bytes] = []
        reader = threading.Thread(target=lambda: frames.append(_read_frame(theirs)))
        reader.start()
        conn.send(_request(b""), memoryview(tail)[5:])
        reader.join()
        expected = _request(tail[5:])
        expected.with_header(correlation_id=1, client_id="cid")  # type: ignore[attr-defined]
        assert frames == [bytes(expected.encode(header=True))]  # type: ignore[attr-defined]
    finally:
        ours.close()
        theirs.close()
