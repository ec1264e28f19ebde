"""Which kind of group holds a group id: classic, KIP-848 consumer or KIP-932 share.

The three kinds share one id space, as in Kafka 4.x's ``GroupMetadataManager`` (one
``groups`` map, no conversion to or from a share group): an id held by one kind refuses
the others' membership requests.

- A **share group** holds its id while it has members or a stored record in
  ``__share_group_state`` (until DeleteGroups): JoinGroup for that id answers 23
  INCONSISTENT_GROUP_PROTOCOL, ConsumerGroupHeartbeat 69 GROUP_ID_NOT_FOUND "Group G is
  not a consumer group.", ConsumerGroupDescribe 69 the same, DescribeGroups Dead (69
  "Group G is not a classic group." from v6).
- A **classic group** holds it while it has members or committed offsets (Kafka's
  "simple" group of an offset commit), a **consumer group** while it exists (it is
  persisted, empty or not): ShareGroupHeartbeat and ShareGroupDescribe for that id answer
  69 GROUP_ID_NOT_FOUND "Group G is not a share group.". An empty classic group without
  committed offsets gives way (Kafka would drop it at its next cleanup).
"""

from __future__ import annotations

from seglog.broker.context import BrokerContext

__all__ = ["CLASSIC", "CONSUMER", "SHARE", "held_by_non_share", "is_share_group"]

CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"
"""Kafka's ``GroupType`` names, as ListGroups v5 reports them (``group_type``)."""


def is_share_group(ctx: BrokerContext, group_id: str) -> bool:
    """Whether ``group_id`` is a share group (members now, or a stored record)."""
    return ctx.share_groups.group(group_id) is not None


def held_by_non_share(ctx: BrokerContext, group_id: str) -> bool:
    """Whether ``group_id`` is a classic group with members or committed offsets, or a
    KIP-848 consumer group."""
    return (
        group_id in ctx.consumer_groups.groups
        or ctx.groups.has_members(group_id)
        or bool(ctx.committed.partitions(group_id))
    )
