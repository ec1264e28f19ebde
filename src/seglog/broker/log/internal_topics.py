"""Names of the broker's internal topics (Kafka's), in one place for every layer."""

from __future__ import annotations

from collections.abc import Sequence

from seglog.schemas import SCHEMAS_TOPIC
from seglog.storage import encode_records

__all__ = [
    "INTERNAL_TOPICS",
    "INTERNAL_TOPIC_CONFIGS",
    "OFFSETS_TOPIC",
    "SCHEMAS_TOPIC",
    "SHARE_GROUP_STATE_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "keyed_batch",
]

OFFSETS_TOPIC = "__consumer_offsets"
"""Committed group offsets: an internal compacted topic (Kafka's ``GroupMetadataManager``)."""

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
"""Share groups' group-level facts (epoch, group configs): an internal compacted topic
(Kafka's share coordinator keeps share-partition state there; here each share partition's
state is its durable subscription's journal, see ``coordinator/share_state.py``)."""

TRANSACTION_STATE_TOPIC = "__transaction_state"
"""Transaction coordinator state, one record per transactional id: an internal compacted
topic (Kafka's ``TransactionStateManager``; see ``coordinator/txn_log.py``)."""

# SCHEMAS_TOPIC ("_schemas"): the schema registry's subjects, versions, configs and modes
# in Confluent Schema Registry's record format (``seglog.schemas``)

INTERNAL_TOPICS = frozenset(
    {OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC, SCHEMAS_TOPIC}
)
"""Every internal topic (Metadata reports them with ``is_internal``)."""

INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
"""Topic configs of every internal topic: compacted (the last record per key is the state),
100 MiB segments (Kafka's ``offsets.topic.segment.bytes``)."""


def keyed_batch(records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One record batch v2 (Kafka's DefaultRecordBatch, no producer id, uncompressed)
    holding ``records`` as (key, value) in order, a None value being a tombstone, all at
    ``timestamp_ms``: what the coordinators append to their internal topic, so one
    request's records become durable (or not) together."""
    keys = [key for key, _value in records]
    values = [value for _key, value in records]
    return bytes(encode_records(values, keys, timestamp_ms, None, 1 << 30))
