"""The raw producer's Produce requests: the record batch spliced in by
``KafkaConnection.send(request, tail)`` gives the bytes kafka-python's encoder gives."""

from __future__ import annotations

import socket
import struct
import threading
from collections import deque
from types import SimpleNamespace

from kafka.protocol.producer import ProduceRequest

from seglog.broker import KafkaConnection
from seglog.spark._produce_raw import RawProducer


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
        conn = KafkaConnection.__new__(KafkaConnection)  # a connected socket, no handshake
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


class _FakeConnection:
    """Answers Produce requests with the given error codes in turn (then 0)."""

    def __init__(self, codes: list[int]) -> None:
        self.codes = codes
        self.sent: list[bytes] = []

    def send(self, request: object, tail: memoryview | bytes | None = None) -> int:
        assert tail is not None
        self.sent.append(bytes(tail))
        return len(self.sent)

    def receive(self) -> object:
        code = self.codes.pop(0) if self.codes else 0
        answer = SimpleNamespace(error_code=code, error_message=None)
        return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[answer])])


def test_send_copy_retries_the_batch_sent_after_its_buffer_was_reused() -> None:
    """The caller reuses its buffer right after ``send_copy``: a retried batch is sent
    again as it was, and answered batches' buffers are reused for the next copies."""
    address = ("127.0.0.1", 1)
    fake = _FakeConnection([0, 19, 0])  # the second batch: NOT_ENOUGH_REPLICAS once
    producer = RawProducer.__new__(RawProducer)  # no broker: the fake answers
    producer.topic, producer.leaders, producer.partitions = "t", {0: address}, 1
    producer._conns, producer._waiting, producer._spare = {address: fake}, {}, []  # type: ignore[dict-item]
    buffer = bytearray(b"a" * 1000)
    producer.send_copy(0, memoryview(buffer))
    buffer[:] = b"b" * 1000
    producer.send_copy(0, memoryview(buffer)[:600])
    buffer[:] = b"c" * 1000  # the second batch is still unanswered: its copy must hold
    producer.flush()
    assert fake.sent == [b"a" * 1000, b"b" * 600, b"b" * 600]
    assert len(producer._spare) == 2  # both copies answered: kept for the next ones
    producer.send_copy(0, memoryview(buffer)[:10])
    producer.flush()
    assert fake.sent[-1] == b"c" * 10
    assert len(producer._spare) == 2
