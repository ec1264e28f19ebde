"""Kafka's ``group.consumer.migration.policy`` (KIP-848 ``ConsumerGroupMigrationPolicy``):
which conversions between a classic group and a KIP-848 consumer group of one id are
allowed, and the refusals seglog gives where Kafka 4.x would convert a group with live
members.

- ``disabled``: no online conversion; ``upgrade``: classic -> consumer; ``downgrade``:
  consumer -> classic; ``bidirectional`` (Kafka 4.x's default): both.
- An **empty** group of either type always gives way to the other, whatever the policy
  (Kafka's ``maybeDeleteEmptyClassicGroup`` / empty consumer group taken over by a
  JoinGroup); committed offsets stay, they belong to the group id.
- A group with **live members** of the other protocol is never converted by seglog: the
  online migration (classic members inside a consumer group, Kafka's
  ``convertToConsumerGroup`` / ``convertToClassicGroup``) is not implemented. The
  request is refused with Kafka's error for that case (69 GROUP_ID_NOT_FOUND on
  ConsumerGroupHeartbeat, 23 INCONSISTENT_GROUP_PROTOCOL on JoinGroup), and where the
  policy would have allowed the conversion the refusal says so in its message and in a
  broker WARNING — never a silent failure.
"""

from __future__ import annotations

import logging

__all__ = [
    "MIGRATION_POLICIES",
    "downgrade_enabled",
    "join_refusal_warning",
    "upgrade_enabled",
    "upgrade_refusal",
]

log = logging.getLogger(__name__)

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
"""The values of ``group.consumer.migration.policy`` (Kafka's, lower case)."""


def upgrade_enabled(policy: str) -> bool:
    """Whether ``policy`` allows classic -> consumer (Kafka's ``isUpgradeEnabled``)."""
    return policy in ("upgrade", "bidirectional")


def downgrade_enabled(policy: str) -> bool:
    """Whether ``policy`` allows consumer -> classic (Kafka's ``isDowngradeEnabled``)."""
    return policy in ("downgrade", "bidirectional")


def upgrade_refusal(group_id: str, policy: str) -> str:
    """The error message of a ConsumerGroupHeartbeat (69 GROUP_ID_NOT_FOUND) for the id
    of a classic group with live members. Under ``disabled`` / ``downgrade`` it is
    Kafka's ("Group G is not a consumer group."); under ``upgrade`` / ``bidirectional``
    Kafka would convert the group online, seglog does not: the message says what to do,
    and the broker logs a WARNING."""
    message = f"Group {group_id} is not a consumer group."
    if not upgrade_enabled(policy):
        return message
    message += (
        f" group.consumer.migration.policy={policy} allows the upgrade, but seglog does not "
        "convert a classic group with live members online: stop its classic consumers "
        "(the empty group then becomes a consumer group, committed offsets kept)."
    )
    log.warning("ConsumerGroupHeartbeat refused: %s", message)
    return message


def join_refusal_warning(group_id: str, policy: str) -> None:
    """Log why a JoinGroup for a consumer group with members is refused (23
    INCONSISTENT_GROUP_PROTOCOL: JoinGroup has no error message). Kafka 4.x would take the
    classic member into the consumer group; seglog does not."""
    log.warning(
        "JoinGroup for consumer group %r refused with 23 INCONSISTENT_GROUP_PROTOCOL: it has "
        "members using group.protocol=consumer and seglog does not take classic members into "
        "a consumer group (group.consumer.migration.policy=%s); once they leave, the empty "
        "group becomes a classic group, committed offsets kept",
        group_id,
        policy,
    )
