"""Names of the broker's internal topics (Kafka's), in one place for every layer."""

from __future__ import annotations

__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "SHARE_GROUP_STATE_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"
"""Committed group offsets: an internal compacted topic (Kafka's ``GroupMetadataManager``)."""

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
"""Share groups' group-level facts (epoch, group configs): an internal compacted topic
(Kafka's share coordinator keeps share-partition state there; here each share partition's
state is its durable subscription's journal, see ``coordinator/share_state.py``)."""

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, SHARE_GROUP_STATE_TOPIC})
"""Every internal topic (Metadata reports them with ``is_internal``)."""
