"""Raw Kafka wire access for tests: hand-made frames over a plain socket.

Requests are framed and responses decoded by the broker's own client codec
(``seglog.broker.protocol.client``: ``encode_request``, ``read_frame``, ``decode_response``,
the framing the broker parses with), while ``send_frame`` / ``recv_frame`` / ``sock`` stay
raw so that tests can send malformed frames, pipeline, or read answers out of order (what
``KafkaConnection``, which answers its requests in order, would not let them do)."""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from seglog.broker.protocol.client import decode_response, encode_request, read_frame
from seglog.broker.protocol.framing import FRAME_SIZE


class Wire:
    """One client connection speaking raw frames."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(FRAME_SIZE.pack(len(payload)) + payload)

    def send(self, request: Any) -> int:
        """Send a versioned kafka-python request; returns its correlation id."""
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, self.correlation_id, "seglog-tests"))
        return self.correlation_id

    def recv_frame(self) -> bytes:
        """The next response frame (after its size), undecoded."""
        return read_frame(self.sock)

    def recv(self, request: Any) -> Any:
        """Read the response to ``request`` and decode it with the matching class."""
        corr, response = decode_response(self.recv_frame(), request)
        assert corr == self.correlation_id
        return response

    def call(self, request: Any) -> Any:
        self.send(request)
        return self.recv(request)

    def assert_closed(self, timeout: float = 5.0) -> None:
        """The broker closed this connection (EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except ConnectionResetError:
            return
        assert data == b"", f"expected a closed connection, got {data!r}"


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """ApiVersions v3 over a fresh connection: api key → (min, max)."""
    with Wire(bootstrap) as w:
        resp = w.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    assert isinstance(resp, ApiVersionsResponse)
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def make_batch(
    values: list[bytes | None],
    *,
    key: bytes | None = None,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int | None = None,
    transactional: bool = False,
) -> bytes:
    """One record batch v2 (kafka-python's builder); ``transactional`` sets attributes
    bit 4."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    if producer_id >= 0:
        builder.set_producer_state(producer_id, producer_epoch, base_sequence, transactional)
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for v in values:
        builder.append(timestamp=ts, key=key, value=v, headers=[])
    builder.close()
    return bytes(builder.buffer())


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path → hex digest)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def produce_request(topic: str, records: bytes, version: int = 9, partition: int = 0) -> object:
    req = ProduceRequest[version]
    topic_data = req.TopicProduceData(
        name=topic,
        partition_data=[
            req.TopicProduceData.PartitionProduceData(index=partition, records=records)
        ],
    )
    return req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[topic_data])


def ensure_topic(w: Wire, name: str) -> uuid.UUID:
    resp = w.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=name)]))
    assert resp.topics[0].error_code == 0
    return resp.topics[0].topic_id  # type: ignore[no-any-return]


def produce(w: Wire, topic: str, values: list[bytes], version: int = 9) -> int:
    req = ProduceRequest[version]
    data = req.TopicProduceData(
        name=topic,
        partition_data=[
            req.TopicProduceData.PartitionProduceData(index=0, records=make_batch(values))
        ],
    )
    resp = w.call(req(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[data]))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0
    return int(part.base_offset)


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
