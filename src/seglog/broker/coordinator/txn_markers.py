"""Transaction markers: the COMMIT/ABORT control batch (Kafka's ``EndTransactionMarker``,
built by storage's ``encode_control_batch``) the coordinator appends to each partition of
an ending transaction, and WriteTxnMarkers appends on request (``seglog transactions
abort``). Storage ends the producer's transaction in that partition when it appends one
(its last stable offset moves on; an abort is recorded in the ``.txnindex``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from seglog.broker.log.topics import TopicManager
from seglog.errors import UnknownTopicError
from seglog.storage import encode_control_batch

__all__ = ["write_marker", "write_markers"]

log = logging.getLogger(__name__)


def write_marker(
    topics: TopicManager,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int,
) -> asyncio.Future[Any] | None:
    """Append one marker to ``topic``-``partition``; returns a future completing once it
    is durable (None under the relaxed fsync policy). Raises UnknownTopicError (a topic or
    partition that does not exist) and what ``Log.append`` raises."""
    plog = topics.log(topic, partition)
    batch = encode_control_batch(
        producer_id,
        producer_epoch,
        commit=commit,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=int(time.time() * 1000),
    )
    info = plog.append(batch, origin="coordinator")
    if not plog.config.fsync_before_ack:
        return None
    return asyncio.wrap_future(plog.sync_future(info.last_offset + 1))


def write_markers(
    topics: TopicManager,
    partitions: Iterable[tuple[str, int]],
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int,
) -> list[asyncio.Future[Any]]:
    """:func:`write_marker` to every partition (sorted); a partition deleted since it
    joined the transaction is skipped with a warning (Kafka's coordinator drops markers of
    deleted partitions too). Returns the durability futures to await."""
    waits = []
    for topic, partition in sorted(partitions):
        try:
            fut = write_marker(
                topics,
                topic,
                partition,
                producer_id,
                producer_epoch,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
            )
        except UnknownTopicError:
            log.warning("no marker for %s-%d: the partition is gone", topic, partition)
            continue
        if fut is not None:
            waits.append(fut)
    return waits
