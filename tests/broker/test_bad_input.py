"""Bad input over raw sockets: each case gets Kafka's answer (an error code, or a closed
connection where Kafka closes it), the broker keeps serving other clients, and no stored
byte changes."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, JoinGroupRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from seglog.broker import BrokerProcess

from ._wire import Wire, api_versions, make_batch, produce_request, tree_digest


def produce_code(w: Wire, topic: str, records: bytes, version: int = 9) -> int:
    resp = w.call(produce_request(topic, records, version))
    return int(resp.responses[0].partition_responses[0].error_code)


def assert_serving(bootstrap: str, topic: str) -> None:
    """Another client still gets answers, and the topic's data is readable."""
    assert 3 in api_versions(bootstrap)
    with Wire(bootstrap) as w:
        resp = w.call(
            MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        )
        assert resp.topics[0].error_code == 0


@pytest.fixture
def seeded(broker: str, topic: str, data_dir: Path) -> Iterator[dict[str, str]]:
    """A topic with a few batches; yields the data directory's digest, and checks after
    the test that no stored byte changed and the broker still serves."""
    with Wire(broker) as w:
        meta = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        assert w.call(meta).topics[0].error_code == 0  # auto-created, as Kafka does
        for i in range(3):
            assert produce_code(w, topic, make_batch([f"v{i}".encode()] * 5)) == 0
    digest = tree_digest(data_dir)
    yield digest
    assert_serving(broker, topic)
    assert tree_digest(data_dir) == digest


# -- closed connections ----------------------------------------------------------------


def test_over_size_frame_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        w.sock.sendall(struct.pack(">i", 100 * 1024 * 1024 + 1) + b"\x00" * 64)
        w.assert_closed()


def test_negative_size_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        w.sock.sendall(struct.pack(">i", -5))
        w.assert_closed()


def test_frame_shorter_than_header_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        w.send_frame(b"\x00\x03\x00")
        w.assert_closed()


def test_truncated_produce_body_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    req = produce_request(topic, make_batch([b"lost"] * 10))
    req.with_header(correlation_id=1, client_id="bad")  # type: ignore[attr-defined]
    encoded = bytes(req.encode(header=True))  # type: ignore[attr-defined]
    with Wire(broker) as w:
        w.send_frame(encoded[: len(encoded) - 40])  # a whole frame, its body cut short
        w.assert_closed()


def test_garbage_body_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    header = struct.pack(">hhih", 3, 12, 1, 3) + b"bad" + b"\x00"
    with Wire(broker) as w:
        w.send_frame(header + b"\xff\xff\xff\xff\xff\xff\xff\x7f")
        w.assert_closed()


def test_client_disconnect_mid_frame(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        w.sock.sendall(struct.pack(">i", 1000) + b"\x00\x00\x00\x09")
    # the broker sees EOF mid-frame; the fixture checks it still serves


def test_unknown_api_key_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        w.send_frame(struct.pack(">hhih", 999, 0, 1, -1))
        w.assert_closed()
    with Wire(broker) as w:  # a real API this broker does not serve (UpdateFeatures)
        w.send_frame(struct.pack(">hhih", 57, 1, 1, -1) + b"\x00" * 32)
        w.assert_closed()


def test_unknown_version_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        w.send_frame(struct.pack(">hhih", 3, 99, 1, -1) + b"\x00" * 8)
        w.assert_closed()


def test_unknown_api_versions_version_gets_error_35(broker: str) -> None:
    with Wire(broker) as w:
        w.send_frame(struct.pack(">hhih", 18, 99, 42, 1) + b"x" + b"\x00" * 4)
        frame = w.recv_frame()
        assert struct.unpack_from(">i", frame, 0)[0] == 42
        body = ApiVersionsResponse.decode(frame[4:], version=0)  # header v0, body v0
        assert body.error_code == 35
        assert any(k.api_key == 18 for k in body.api_keys)
        # the connection stays open: the client retries with a version it sees here
        resp = w.call(ApiVersionsRequest[0]())
        assert resp.error_code == 0


# -- error codes -------------------------------------------------------------------------


def test_bad_crc_is_corrupt_message(broker: str, topic: str, seeded: dict[str, str]) -> None:
    batch = bytearray(make_batch([b"payload"] * 3))
    batch[-1] ^= 0xFF  # a record byte: covered by the CRC-32C
    with Wire(broker) as w:
        assert produce_code(w, topic, bytes(batch)) == 2  # CORRUPT_MESSAGE
        assert produce_code(w, topic, bytes(batch[:-5])) == 2  # batch length disagrees


def test_bad_magic(broker: str, topic: str, seeded: dict[str, str]) -> None:
    batch = bytearray(make_batch([b"payload"]))
    batch[16] = 1  # magic 1 in a v2 layout
    with Wire(broker) as w:
        assert produce_code(w, topic, bytes(batch)) == 87  # INVALID_RECORD


def test_legacy_produce_v2_gets_error_not_close(
    broker: str, topic: str, seeded: dict[str, str]
) -> None:
    """kafka-python pinned to api_version (0,10,1) sends Produce v2 with magic-1 batches:
    answered with INVALID_RECORD (closing would make it reconnect forever)."""
    builder = MemoryRecordsBuilder(magic=1, compression_type=0, batch_size=1 << 16)
    builder.append(timestamp=1_700_000_000_000, key=b"k", value=b"old", headers=None)
    builder.close()
    with Wire(broker) as w:
        assert produce_code(w, topic, bytes(builder.buffer()), version=2) == 87
        assert produce_code(w, topic, bytes(builder.buffer()), version=2) == 87  # still open


def test_batch_over_message_max_bytes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    big = make_batch([b"x" * (1100 * 1024)])
    with Wire(broker) as w:
        assert produce_code(w, topic, big) == 10  # MESSAGE_TOO_LARGE


@pytest.mark.parametrize("name", ["..", "../../etc", "a/b", "", "x" * 250])
def test_produce_illegal_topic_name(
    broker: str, topic: str, seeded: dict[str, str], data_dir: Path, name: str
) -> None:
    with Wire(broker) as w:
        assert produce_code(w, name, make_batch([b"v"])) == 17  # INVALID_TOPIC_EXCEPTION
    assert not (data_dir.parent / "etc-0").exists()


def test_produce_unknown_partition(broker: str, topic: str, seeded: dict[str, str]) -> None:
    with Wire(broker) as w:
        resp = w.call(produce_request(topic, make_batch([b"v"]), partition=7))
        assert resp.responses[0].partition_responses[0].error_code == 3


def test_fetch_beyond_log_end(broker: str, topic: str, seeded: dict[str, str]) -> None:
    req = FetchRequest[12]
    fetch = req(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            req.FetchTopic(
                topic=topic,
                partitions=[
                    req.FetchTopic.FetchPartition(
                        partition=0,
                        fetch_offset=16,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                        log_start_offset=-1,
                        last_fetched_epoch=-1,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with Wire(broker) as w:
        resp = w.call(fetch)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 1  # OFFSET_OUT_OF_RANGE
    assert part.high_watermark == 15


def test_acks_0_error_closes(broker: str, topic: str, seeded: dict[str, str]) -> None:
    """With acks=0 there is no response to carry an error: Kafka closes the connection."""
    req = produce_request("../etc", make_batch([b"v"]))
    req.acks = 0  # type: ignore[attr-defined]
    with Wire(broker) as w:
        w.send(req)
        w.assert_closed()


def test_socket_request_max_bytes_flag(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(["--socket-request-max-bytes", "4096"])
    with Wire(proc.bootstrap) as w:
        topic_meta = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="s")])
        assert w.call(topic_meta).topics[0].error_code == 0
        assert produce_code(w, "s", make_batch([b"x" * 1000])) == 0  # frame < 4096 bytes
    digest = tree_digest(proc.data_dir)
    with Wire(proc.bootstrap) as w:
        w.send(produce_request("s", make_batch([b"x" * 5000])))  # frame > 4096 bytes
        w.assert_closed()
    assert_serving(proc.bootstrap, "s")
    assert tree_digest(proc.data_dir) == digest


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(
            lambda t: ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=None),
            id="list-offsets-null-topics",
        ),
        pytest.param(
            lambda t: ListOffsetsRequest[7](
                replica_id=-1, isolation_level=0,
                topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=None)],
            ),
            id="list-offsets-null-partitions",
        ),
        pytest.param(
            lambda t: CreateTopicsRequest[5](topics=None, timeout_ms=1000, validate_only=False),
            id="create-topics-null-topics",
        ),
        pytest.param(
            lambda t: JoinGroupRequest[5](
                group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                group_instance_id=None, protocol_type="consumer", protocols=None,
            ),
            id="join-group-null-protocols",
        ),
    ],
)  # fmt: skip
def test_null_where_the_schema_forbids_it_closes(
    broker_process: BrokerProcess,
    broker: str,
    topic: str,
    seeded: dict[str, str],
    request_: Callable[[str], object],
) -> None:
    before = broker_process.log_text().count("Traceback")
    with Wire(broker) as w:
        w.send(request_(topic))
        w.assert_closed()
    log = broker_process.log_text()
    assert log.count("Traceback") == before  # rejected as malformed, not a crash
    assert "not nullable" in log
