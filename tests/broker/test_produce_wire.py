"""The broker's own Produce codec (``protocol.produce_wire``) against kafka-python's: every
version parses what kafka-python encodes and encodes exactly the bytes kafka-python
would; malformed bodies raise ProtocolError before anything is allocated from a length."""

from __future__ import annotations

import struct
from typing import NamedTuple

import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from seglog.broker.apis.registry import REGISTRY, flexible_request
from seglog.broker.protocol.framing import parse_request_header
from seglog.broker.protocol.produce_wire import encode_produce_response, parse_produce
from seglog.errors import ProtocolError

from ._wire import make_batch

VERSIONS = list(range(3, REGISTRY[0].max_version + 1))


def request_frame(version: int, topics: dict[str, list[tuple[int, bytes | None]]]) -> bytes:
    req = ProduceRequest[version]
    data = [
        req.TopicProduceData(
            name=name,
            partition_data=[
                req.TopicProduceData.PartitionProduceData(index=i, records=r) for i, r in parts
            ],
        )
        for name, parts in topics.items()
    ]
    request = req(transactional_id="tx-é", acks=-1, timeout_ms=1234, topic_data=data)
    request.with_header(correlation_id=9, client_id="wire-test")
    return bytes(request.encode(header=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_matches_kafka_python(version: int) -> None:
    batch_a, batch_b = make_batch([b"a"] * 3), make_batch([b"b" * 300])
    frame = request_frame(version, {"t1": [(0, batch_a), (5, None)], "t.two": [(2, batch_b)]})
    view = memoryview(frame)
    header = parse_request_header(view, flexible_request)
    body = parse_produce(view, header.body_offset, version)
    assert (body.transactional_id, body.acks, body.timeout_ms) == ("tx-é", -1, 1234)
    got = [
        (name, [(p.partition, None if p.records is None else bytes(p.records)) for p in parts])
        for name, parts in body.topics
    ]
    assert got == [("t1", [(0, batch_a), (5, None)]), ("t.two", [(2, batch_b)])]
    records = body.topics[0][1][0].records
    assert isinstance(records, memoryview)
    assert records.obj is view.obj  # a slice of the frame, not a copy


class Answer(NamedTuple):
    partition: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int


@pytest.mark.parametrize("version", VERSIONS)
def test_response_bytes_match_kafka_python(version: int) -> None:
    topics = [
        ("t1", [Answer(0, 0, 1 << 40, -1, 7), Answer(3, 3, -1, -1, -1)]),
        ("x" * 200, [Answer(1, 10, -1, 1_700_000_000_000, 0)]),
        ("empty", []),
    ]
    mine = encode_produce_response(version, 4242, topics)
    resp = ProduceResponse[version]
    expected = resp(
        throttle_time_ms=0,
        responses=[
            resp.TopicProduceResponse(
                name=name,
                partition_responses=[
                    resp.TopicProduceResponse.PartitionProduceResponse(
                        index=a.partition,
                        error_code=a.error_code,
                        base_offset=a.base_offset,
                        log_append_time_ms=a.log_append_time_ms,
                        log_start_offset=a.log_start_offset,
                        record_errors=[],
                        error_message=None,
                    )
                    for a in answers
                ],
            )
            for name, answers in topics
        ],
    )
    expected.with_header(correlation_id=4242)
    assert bytes(mine) == bytes(expected.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [8, 9])
def test_every_truncation_is_a_protocol_error(version: int) -> None:
    frame = request_frame(version, {"t": [(0, make_batch([b"v"] * 2)), (1, None)]})
    header = parse_request_header(memoryview(frame), flexible_request)
    # the last byte of a flexible body is its (empty) tagged fields: cut before it
    for cut in range(header.body_offset, len(frame) - 1):
        with pytest.raises(ProtocolError):
            parse_produce(memoryview(frame[:cut]), header.body_offset, version)


@pytest.mark.parametrize(
    ("version", "body"),
    [
        # topic array of 2^31-1 elements in a 20-byte body
        (8, struct.pack(">hhii", -1, -1, 5000, 0x7FFFFFFF) + b"\x00" * 8),
        # one topic, partition array of 2^31-1 elements
        (8, struct.pack(">hhii", -1, -1, 5000, 1) + b"\x00\x01t" + struct.pack(">i", 2**31 - 1)),
        # flexible: compact topic array of 2^28 elements (varint)
        (9, b"\x00" + struct.pack(">hi", -1, 5000) + b"\x81\x80\x80\x80\x01" + b"\x00" * 4),
        # records length past the end of the frame
        (8, struct.pack(">hhii", -1, -1, 5000, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, 999)),
        # overlong varint
        (9, b"\xff\xff\xff\xff\xff\xff"),
    ],
)
def test_counts_and_lengths_checked_before_use(version: int, body: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_produce(memoryview(body), 0, version)


def test_tagged_fields_are_skipped() -> None:
    """A tagged-field section is a plain uvarint count (not a compact length): a body
    carrying one unknown tagged field per struct still parses (the reader before the merge
    with ``protocol.bounds`` read the count as a compact length and lost its place)."""
    batch = make_batch([b"tagged"])
    tag = b"\x01\x07\x02hi"  # one field: tag 7, 2 bytes
    body = (
        b"\x00"  # transactional_id: null
        + struct.pack(">hi", 1, 500)
        + b"\x02"  # one topic
        + b"\x02t"
        + b"\x02"  # one partition
        + struct.pack(">i", 4)
        + bytes([len(batch) + 1])
        + batch
        + tag  # partition tags
        + tag  # topic tags
        + tag  # body tags
    )
    assert len(batch) + 1 < 0x80
    parsed = parse_produce(memoryview(body), 0, 9)
    assert [
        (n, [(p.partition, bytes(p.records or b"")) for p in ps]) for n, ps in parsed.topics
    ] == [("t", [(4, batch)])]
