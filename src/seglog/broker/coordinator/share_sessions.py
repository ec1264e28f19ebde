"""Share sessions (KIP-932; Kafka's ``ShareSessionCache``): the partitions one member of a
share group fetches from, and the epoch its next ShareFetch or ShareAcknowledge carries.

Keyed by (group id, member id). Rules, as Kafka's ``SharePartitionManager.newContext``:

- ShareFetch with epoch 0 opens a session with the request's partitions (a session the
  member already had is closed first, its acquired records released); acknowledgements
  in such a request are 42 INVALID_REQUEST (nothing is acquired yet in that session).
  More than ``group.share.max.share.sessions`` sessions: 133 SHARE_SESSION_LIMIT_REACHED.
- Any other positive epoch needs the member's session (122 SHARE_SESSION_NOT_FOUND) and
  must be its next epoch (123 INVALID_SHARE_SESSION_EPOCH); the session then expects the
  following one (1, 2, ... wrapping to 1 after 2^31-1). A ShareFetch adds its partitions
  to the session and removes its forgotten ones (incremental).
- Fairness: fetches of one group waiting for records take them, once woken together,
  least recently served first (:meth:`ShareSessionCache.turn`).
- Epoch -1 closes the session after its acknowledgements (no records are acquired);
  the records the member still holds are released. Without a session (closed already,
  or lost in a restart) its acknowledgements are still applied, as Kafka's.
  ShareAcknowledge with epoch 0 is 123 (acknowledgements never open a session).
"""

from __future__ import annotations

import asyncio
import dataclasses

from seglog.broker.protocol import errors as _errors

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache"]

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_MAX_EPOCH = (1 << 31) - 1

PartitionKey = tuple[str, int]
"""(topic name, partition)."""


@dataclasses.dataclass
class ShareSession:
    """One member's share session."""

    group_id: str
    member_id: str
    epoch: int = 1
    """The epoch the next request must carry."""
    partitions: dict[PartitionKey, None] = dataclasses.field(default_factory=dict)
    """The partitions fetched from, in the order they were added."""
    waiting: bool = False
    """A ShareFetch of this session is waiting for records (long poll)."""
    last_served: float = float("-inf")
    """When a ShareFetch of this session last acquired records (``time.monotonic()``)."""

    def advance(self) -> None:
        """Expect the next epoch."""
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


class ShareSessionCache:
    """Every open share session; at most ``max_sessions``."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._acquiring: dict[str, asyncio.Lock] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member's session, or None."""
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str) -> tuple[int, ShareSession | None]:
        """A new session for the member (epoch 0), replacing its old one (the caller
        releases that one's records first): (0, session) or (133, None)."""
        key = (group_id, member_id)
        if key not in self._sessions and len(self._sessions) >= self.max_sessions:
            return _errors.SHARE_SESSION_LIMIT_REACHED, None
        session = self._sessions[key] = ShareSession(group_id, member_id)
        return _errors.NONE, session

    def check(self, group_id: str, member_id: str, epoch: int) -> tuple[int, ShareSession | None]:
        """The member's session for a request with ``epoch`` (> 0 or -1): (0, session),
        (122, None) without a session, (123, None) for an epoch out of sequence; epoch -1
        without a session gets a detached empty one (the final acknowledgements apply).
        The caller advances (:meth:`ShareSession.advance`) or closes (:meth:`close`) it."""
        session = self._sessions.get((group_id, member_id))
        if session is None and epoch == FINAL_EPOCH:  # Kafka: the final acknowledgements
            return _errors.NONE, ShareSession(group_id, member_id)  # count without a session
        if session is None:
            return _errors.SHARE_SESSION_NOT_FOUND, None
        if epoch not in (FINAL_EPOCH, session.epoch):
            return _errors.INVALID_SHARE_SESSION_EPOCH, None
        return _errors.NONE, session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        """Drop the member's session (returned, None if it had none)."""
        return self._sessions.pop((group_id, member_id), None)

    def turn(self, session: ShareSession) -> int:
        """How many waiting sessions of the same group were served less recently than
        ``session``: woken together by new records, waiting fetches take them in that
        order (least recently served first), so that consumers sharing a partition share
        its records instead of the first one woken taking every batch."""
        return sum(
            1
            for s in self._sessions.values()
            if s.waiting
            and s is not session
            and s.group_id == session.group_id
            and s.last_served < session.last_served
        )

    def acquiring(self, group_id: str) -> asyncio.Lock:
        """The group's acquisition lock: fetches of one group acquire one at a time, in
        the order they ask (asyncio's lock is first come, first served), which keeps the
        :meth:`turn` order once their work moves to worker threads."""
        lock = self._acquiring.get(group_id)
        if lock is None:
            lock = self._acquiring[group_id] = asyncio.Lock()
        return lock

    def forget_group(self, group_id: str) -> int:
        """Drop every session of a deleted group (members that left with a heartbeat keep
        theirs until their final acknowledgement); how many."""
        keys = [k for k in self._sessions if k[0] == group_id]
        for key in keys:
            del self._sessions[key]
        self._acquiring.pop(group_id, None)
        return len(keys)

    def forget_partition(self, topic: str, partition: int | None = None) -> None:
        """Remove a deleted topic's partitions (all when ``partition`` is None) from
        every session."""
        for session in self._sessions.values():
            for key in [k for k in session.partitions if k[0] == topic]:
                if partition is None or key[1] == partition:
                    del session.partitions[key]
