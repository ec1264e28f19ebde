"""Transactional requests for tests (raw wire, kafka-python's schema classes): the
coordinator's APIs, transactional batches, read_committed Fetch and ListOffsets."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest
from kafka.record.memory_records import MemoryRecords

from ._wire import Wire, fetch_request, make_batch, produce_request

PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE = 90, 47, 48
INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS = 49, 50, 51


def init(w: Wire, txn_id: str, timeout_ms: int = 30_000, version: int = 4, **kw: Any) -> Any:
    return w.call(
        InitProducerIdRequest[version](
            transactional_id=txn_id, transaction_timeout_ms=timeout_ms, **kw
        )
    )


def add(w: Wire, txn_id: str, pid: int, epoch: int, topic: str, version: int = 3) -> int:
    req = AddPartitionsToTxnRequest[version]
    resp = w.call(
        req(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[req.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
        )
    )
    return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def end(w: Wire, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    resp = w.call(
        EndTxnRequest[version](
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
        )
    )
    return int(resp.error_code)


def send(w: Wire, topic: str, batch: bytes) -> int:
    resp = w.call(produce_request(topic, batch))
    return int(resp.responses[0].partition_responses[0].error_code)


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return make_batch(
        list(values), producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


def fetch(w: Wire, topic: str, isolation: int) -> Any:
    req = fetch_request(topic, {0: 0})
    req.isolation_level = isolation
    return w.call(req).responses[0].partitions[0]


def stored_values(records: bytes | None) -> list[bytes]:
    """Values of the data records (control batches left out, as consumers do)."""
    out = []
    for batch in MemoryRecords(records or b""):
        if batch.is_control_batch:
            continue
        out += [r.value for r in batch]
    return out


def latest(w: Wire, topic: str, isolation: int) -> int:
    req = ListOffsetsRequest[7]
    resp = w.call(
        req(
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                req.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        req.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=-1
                        )
                    ],
                )
            ],
        )
    )
    return int(resp.topics[0].partitions[0].offset)
