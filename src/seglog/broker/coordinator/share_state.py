"""What share groups keep durably, and where (KIP-932).

Kafka keeps a share partition's state (its start offset, the in-flight records' states and
delivery counts) in the internal topic ``__share_group_state`` through its share
coordinator, and the group's own facts (epoch, members, configs) in ``__consumer_offsets``
and the metadata log. Here the two halves live where seglog already has an engine:

- **Share-partition state** is a durable subscription (``seglog.storage``'s
  ``Log.subscribe``) of the partition log, named :func:`subscription_name` of the group,
  in ``<partition>/subscriptions/``: its position and the delivered-but-unsettled
  offsets with their delivery counts, journaled (and fsynced under the default policy)
  before a ShareFetch answers with the records or a ShareAcknowledge with its result.
  So acknowledged records are never delivered again after a restart or a kill -9, and
  acquired-but-unacknowledged ones are (their locks are gone with the process; the
  delivery count goes on). The share-partition start offset (SPSO) is the subscription's
  lowest unsettled offset, else its position (``floor``); AlterShareGroupOffsets
  replaces the subscription by one starting at the new offset, DeleteShareGroupOffsets
  removes it.
- **Group-level facts** are one record per group in the internal compacted topic
  ``__share_group_state`` (this module, :class:`ShareGroupState`; created with the first
  share group, so a broker that never saw one lists no such topic): key ``share:<group>``
  (UTF-8), value JSON ``{"v": 1, "epoch": <group epoch>, "configs": {"share.auto.offset
  .reset": "earliest"}}``, a null value (tombstone) when the group is gone. The group
  epoch survives a restart, so epochs handed out later are never lower; the group
  configs (Kafka's GROUP config resource) are answered only once durable. Membership is
  not persisted: members rejoin after a restart (their heartbeat gets 25
  UNKNOWN_MEMBER_ID), as a Kafka member whose coordinator moved.

Records are written by this class only (Produce to the topic answers 17
INVALID_TOPIC_EXCEPTION); one that does not decode is skipped with a warning at load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from typing import Any

from seglog.broker.log.internal_topics import (
    INTERNAL_TOPIC_CONFIGS,
    SHARE_GROUP_STATE_TOPIC,
    keyed_batch,
)
from seglog.broker.log.topics import TopicManager
from seglog.storage import OFFSET_OLDEST, Log

__all__ = [
    "GROUP_CONFIGS",
    "SHARE_GROUP_STATE_TOPIC",
    "ShareGroupState",
    "subscription_name",
    "validate_group_config",
]

log = logging.getLogger(__name__)

_KEY_PREFIX = b"share:"
_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,180}")

GROUP_CONFIGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "share.auto.offset.reset": ("latest", ("latest", "earliest")),
}
"""Share-group configs (Kafka's ``GroupConfig``) served: name -> (default, allowed values).
``share.auto.offset.reset``: where a share partition starts when the group first fetches
from it (``latest``: records produced from then on; ``earliest``: the log start)."""


def validate_group_config(name: str, value: str | None) -> None:
    """ValueError unless ``name`` is a served group config and ``value`` one of its values
    (None: back to the default)."""
    spec = GROUP_CONFIGS.get(name)
    if spec is None:
        raise ValueError(f"Unknown group config name: {name}")
    if value is not None and value not in spec[1]:
        raise ValueError(f"Invalid value {value} for configuration {name}: one of {spec[1]}")


def subscription_name(group: str) -> str:
    """The durable subscription holding ``group``'s state in each partition it reads:
    ``share.<group>`` when the id is a plain file name, else ``share-h<sha256 hex>``."""
    if _PLAIN.fullmatch(group):
        return "share." + group
    return "share-h" + hashlib.sha256(group.encode()).hexdigest()


class ShareGroupState:
    """group -> (epoch, configs), backed by ``__share_group_state`` (replayed at once when
    it exists; created, as Kafka creates it, when the first share group is stored). Runs on
    the broker's event loop."""

    def __init__(self, topics: TopicManager) -> None:
        self._topics = topics
        self._log: Log | None = None
        self._groups: dict[str, tuple[int, dict[str, str]]] = {}
        if topics.get(SHARE_GROUP_STATE_TOPIC) is not None:
            self._replay(topics.log(SHARE_GROUP_STATE_TOPIC, 0))

    def _state_log(self) -> Log:
        if self._log is None:
            if self._topics.get(SHARE_GROUP_STATE_TOPIC) is None:
                self._topics.create(SHARE_GROUP_STATE_TOPIC, 1, INTERNAL_TOPIC_CONFIGS)
            self._log = self._topics.log(SHARE_GROUP_STATE_TOPIC, 0)
        return self._log

    def _replay(self, state_log: Log) -> None:
        self._log = state_log
        offset = OFFSET_OLDEST
        while True:
            offset, messages = state_log.consume(offset, 10_000)
            if not messages:
                break
            for m in messages:
                try:
                    if m.key is None or not m.key.startswith(_KEY_PREFIX):
                        raise ValueError("not a share group key")
                    group = m.key[len(_KEY_PREFIX) :].decode()
                    if m.value is None:
                        self._groups.pop(group, None)
                        continue
                    doc = json.loads(m.value)
                    if doc.get("v") != 1:
                        raise ValueError(f"version {doc.get('v')!r}")
                    configs = {str(k): str(v) for k, v in doc["configs"].items()}
                    self._groups[group] = (int(doc["epoch"]), configs)
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    log.warning(
                        "skipping record %d of %s: %s", m.offset, SHARE_GROUP_STATE_TOPIC, exc
                    )
        if self._groups:
            log.info("loaded %d share group(s) from %s", len(self._groups), SHARE_GROUP_STATE_TOPIC)

    def groups(self) -> list[str]:
        """Every share group with a stored record."""
        return list(self._groups)

    def epoch(self, group: str) -> int:
        """The group's last stored epoch (0 when none)."""
        return self._groups.get(group, (0, {}))[0]

    def configs(self, group: str) -> dict[str, str]:
        """The group's config overrides (a copy)."""
        return dict(self._groups.get(group, (0, {}))[1])

    def config(self, group: str, name: str) -> str:
        """A group config's value: its override, else the default."""
        return self._groups.get(group, (0, {}))[1].get(name, GROUP_CONFIGS[name][0])

    def save(self, group: str, epoch: int, configs: dict[str, str], *, durable: bool) -> None:
        """Store the group's record; ``durable``: return only once it is fsynced (group
        configs), else the log's group commit makes it durable soon after (epochs: a lost
        epoch record only makes the next start reuse an epoch no member holds any more).
        Raises what ``Log.append`` / ``Log.sync`` raise."""
        value = json.dumps({"v": 1, "epoch": epoch, "configs": configs}).encode()
        state_log = self._append(_KEY_PREFIX + group.encode(), value)
        self._groups[group] = (epoch, dict(configs))
        if durable and state_log.config.fsync_before_ack:
            state_log.sync()

    def delete(self, group: str) -> None:
        """Forget the group: a tombstone (null value) for its key, fsynced before returning
        under the default policy (DeleteGroups answers once it is durable); its epoch and
        config overrides go with it, so a group of that id starts afresh at epoch 1 with
        the default configs. Nothing is written for a group without a record. Raises what
        ``Log.append`` / ``Log.sync`` raise."""
        if group not in self._groups:
            return
        state_log = self._append(_KEY_PREFIX + group.encode(), None)
        del self._groups[group]
        if state_log.config.fsync_before_ack:
            state_log.sync()

    def _append(self, key: bytes, value: bytes | None) -> Log:
        state_log = self._state_log()
        state_log.append(keyed_batch([(key, value)], int(time.time() * 1000)))
        return state_log

    def describe(self) -> dict[str, Any]:
        """Every group's (epoch, configs), for logs and tests."""
        return {g: {"epoch": e, "configs": c} for g, (e, c) in self._groups.items()}
