"""Names of the broker's internal topics (Kafka's), in one place for every layer."""

from __future__ import annotations

__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"
"""Committed group offsets: an internal compacted topic (Kafka's ``GroupMetadataManager``)."""

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
"""Every internal topic (Metadata reports them with ``is_internal``)."""
