"""Kafka's embedded consumer protocol (``ConsumerProtocol``, protocol type "consumer"): the
bytes classic consumers put in JoinGroup (``ConsumerProtocolSubscription``) and get from
SyncGroup (``ConsumerProtocolAssignment``), read and written where the broker itself must
understand them: classic members inside a KIP-848 consumer group, and the conversions
between the two group types (``group_migration``).

Both are kafka-python's schema classes (Kafka's JSON message definitions, versions 0-3),
prefixed by their version as an int16; a version above 3 is read as 3 (later versions
only add fields at the end, as Kafka's ``ConsumerProtocol`` reads them)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from seglog.broker.coordinator.assignors import TP

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
"""The JoinGroup protocol type of Kafka consumers (``ConsumerProtocol.PROTOCOL_TYPE``)."""

_MAX_VERSION = 3
_Assignment: Any = ConsumerProtocolAssignment
_Subscription: Any = ConsumerProtocolSubscription


@dataclasses.dataclass(frozen=True)
class Subscription:
    """A decoded ``ConsumerProtocolSubscription``: ``version`` as sent, topic names,
    ``owned`` partitions (v1+; empty before), ``rack_id`` (v3+; None before)."""

    version: int
    topics: tuple[str, ...]
    owned: frozenset[TP]
    rack_id: str | None


def _read(cls: Any, data: bytes, what: str) -> tuple[int, Any]:
    """(version, decoded body). Raises ValueError for malformed bytes."""
    if len(data) < 2:
        raise ValueError(f"{what}: {len(data)} bytes")
    (version,) = struct.unpack_from(">h", data)
    if version < 0:
        raise ValueError(f"{what}: version {version}")
    try:
        body = cls.decode(data[2:], version=min(version, _MAX_VERSION), header=False)
    except (struct.error, ValueError, TypeError, UnicodeDecodeError, EOFError) as exc:
        raise ValueError(f"{what}: {exc!r}") from None
    return version, body


def decode_subscription(data: bytes) -> Subscription:
    """A classic consumer's JoinGroup protocol metadata. Raises ValueError when malformed
    (a null topic name included)."""
    version, body = _read(_Subscription, data, "consumer protocol subscription")
    topics = list(body.topics or ())
    owned: set[TP] = set()
    for tp in (body.owned_partitions or ()) if version >= 1 else ():
        if tp.topic is None:
            raise ValueError("consumer protocol subscription: null owned topic")
        owned.update((str(tp.topic), int(p)) for p in tp.partitions or ())
    if any(t is None for t in topics):
        raise ValueError("consumer protocol subscription: null topic")
    rack = body.rack_id if version >= 3 else None
    return Subscription(version, tuple(sorted(set(topics))), frozenset(owned), rack)


def decode_assignment(data: bytes) -> frozenset[TP]:
    """The partitions of a ``ConsumerProtocolAssignment`` (empty bytes: none, as a classic
    group member's before its first SyncGroup). Raises ValueError when malformed."""
    if not data:
        return frozenset()
    _version, body = _read(_Assignment, data, "consumer protocol assignment")
    out: set[TP] = set()
    for tp in body.assigned_partitions or ():
        if tp.topic is None:
            raise ValueError("consumer protocol assignment: null topic")
        out.update((str(tp.topic), int(p)) for p in tp.partitions or ())
    return frozenset(out)


def encode_assignment(tps: frozenset[TP], version: int) -> bytes:
    """``tps`` as a ``ConsumerProtocolAssignment`` of ``version`` (capped to 0..3: the
    version of the member's subscription, as Kafka answers), no user data."""
    version = max(0, min(version, _MAX_VERSION))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    body = _Assignment(
        assigned_partitions=[
            _Assignment.TopicPartition(topic=t, partitions=parts) for t, parts in by_topic.items()
        ],
        user_data=None,
    )
    return bytes(body.encode(version=version))
