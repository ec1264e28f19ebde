"""Live fuzzing: hypothesis mutates valid request frames (bit flips, overwritten bytes,
truncation, insertion, wrong sizes) of a dozen APIs and sends each on its own connection
to a real ``seglog serve``. The broker must answer or close the connection, never crash,
never log a traceback, and never change a stored byte of the seeded topic.

CI runs ``SEGLOG_FUZZ_EXAMPLES`` (default 300) examples; run longer by hand with e.g.
``SEGLOG_FUZZ_EXAMPLES=30000 pytest tests/broker/test_fuzz.py``.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.consumer import (
    JoinGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from seglog.broker import BrokerProcess

from ._wire import Wire, ensure_topic, fetch_request, make_batch, produce_request

EXAMPLES = int(os.environ.get("SEGLOG_FUZZ_EXAMPLES", "300"))
TOPIC = "fuzzed"


def _frame(request: Any, correlation_id: int = 7) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="fuzz")
    body = bytes(request.encode(header=True))
    return struct.pack(">i", len(body)) + body


def _seeds() -> list[bytes]:
    lo = ListOffsetsRequest[7]
    oc = OffsetCommitRequest[8]
    of = OffsetFetchRequest[7]
    jg = JoinGroupRequest[7]
    ct = CreateTopicsRequest[5]
    dc = DescribeConfigsRequest[4]
    requests: list[Any] = [
        ApiVersionsRequest[3](client_software_name="fuzz", client_software_version="1"),
        MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]),
        produce_request(TOPIC, make_batch([b"fuzz-a", b"fuzz-b"])),
        fetch_request(TOPIC, {0: 0}),
        lo(
            replica_id=-1,
            isolation_level=0,
            topics=[
                lo.ListOffsetsTopic(
                    name=TOPIC,
                    partitions=[
                        lo.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=-1
                        )
                    ],
                )
            ],
        ),
        oc(
            group_id="fz",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                oc.OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        oc.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                    ],
                )
            ],
        ),
        of(group_id="fz", topics=None, require_stable=False),
        jg(
            group_id="fz",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")],
        ),
        ct(
            topics=[
                ct.CreatableTopic(
                    name="fz-new",
                    num_partitions=1,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=1000,
            validate_only=True,
        ),
        dc(
            resources=[
                dc.DescribeConfigsResource(
                    resource_type=2, resource_name=TOPIC, configuration_keys=None
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        ),
    ]
    return [_frame(r) for r in requests]


SEEDS = _seeds()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "size"]))
        if kind == "flip" and len(frame) > 4:
            pos = draw(st.integers(4, len(frame) - 1))
            frame[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and len(frame) > 4:
            pos = draw(st.integers(4, len(frame) - 1))
            frame[pos] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80]))
        elif kind == "truncate" and len(frame) > 5:
            cut = draw(st.integers(5, len(frame) - 1))
            del frame[cut:]
            frame[0:4] = struct.pack(">i", len(frame) - 4)
        elif kind == "insert":
            pos = draw(st.integers(4, len(frame)))
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=16))
            frame[0:4] = struct.pack(">i", len(frame) - 4)
        elif kind == "size":
            frame[0:4] = struct.pack(">i", draw(st.integers(-5, len(frame) + 8)))
    return bytes(frame)


@pytest.fixture(scope="module")
def seeded_dir(broker_process: BrokerProcess) -> Path:
    with Wire(broker_process.bootstrap) as w:
        ensure_topic(w, TOPIC)
        w.call(produce_request(TOPIC, make_batch([b"kept-1", b"kept-2"])))
    return broker_process.data_dir / f"{TOPIC}-0"


def _send(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(frame)
        s.shutdown(socket.SHUT_WR)  # a stalled partial frame is closed by the broker too
        try:
            while s.recv(65536):
                pass
        except (ConnectionResetError, TimeoutError):
            pass


def test_mutated_frames_never_crash_or_damage(
    broker_process: BrokerProcess, seeded_dir: Path
) -> None:
    before_log = broker_process.log_text().count("Traceback")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(mutated())
    def run(frame: bytes) -> None:
        _send(broker_process.port, frame)

    before = {p.name: p.read_bytes() for p in seeded_dir.glob("*.log")}  # the stored data
    assert before
    run()
    assert broker_process.process.poll() is None, broker_process.log_text()[-3000:]
    log = broker_process.log_text()
    assert log.count("Traceback") == before_log, log[-5000:]
    with Wire(broker_process.bootstrap) as w:  # still serving
        resp = w.call(
            MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)])
        )
        assert resp.topics[0].error_code == 0
    # a mutated Produce may still be a valid append; what was stored stays a prefix
    for name, data in before.items():
        assert (seeded_dir / name).read_bytes().startswith(data), name
