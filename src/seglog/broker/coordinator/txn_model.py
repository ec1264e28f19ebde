"""A transactional id's state at the transaction coordinator (Kafka's
``TransactionMetadata`` and ``TransactionState``, KIP-98).

States and the transitions the coordinator makes (Kafka's numbering, as written in
``__transaction_state``)::

    Empty(0) --AddPartitions/AddOffsets--> Ongoing(1)
    Ongoing --EndTxn(commit)--> PrepareCommit(2) --markers written--> CompleteCommit(4)
    Ongoing --EndTxn(abort), timeout, fencing--> PrepareAbort(3) --markers--> CompleteAbort(5)
    Complete*/Empty --InitProducerId--> Empty (epoch bumped)
    Empty/Complete* --transactional.id.expiration.ms--> Dead(6) (a tombstone)

``PrepareEpochFence`` (7) is Kafka's in-memory step of fencing an ongoing transaction; it
is never written here (the fence writes PrepareAbort with the bumped epoch).
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["MAX_PRODUCER_EPOCH", "TransactionMetadata", "TxnState"]

MAX_PRODUCER_EPOCH = 32766
"""The last epoch handed out for a producer id (Kafka: ``Short.MaxValue - 1``); past it
InitProducerId allocates a new producer id with epoch 0."""


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids (``TransactionLogValue.TransactionStatus``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions filters):
        ``Empty``, ``Ongoing``, ``PrepareCommit``, ..."""
        return _NAMES[self]

    @classmethod
    def by_kafka_name(cls, name: str) -> TxnState | None:
        """The state named ``name`` (Kafka's spelling), None when unknown."""
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

Partition = tuple[str, int]


@dataclasses.dataclass
class TransactionMetadata:
    """One transactional id: its producer id and epoch, timeout (ms), state, the
    partitions of its ongoing transaction, and timestamps (ms since the epoch).
    ``completing`` is set while EndTxn or an abort writes markers (requests for the id then
    get 51 CONCURRENT_TRANSACTIONS, as Kafka's ``pendingState``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[Partition] = dataclasses.field(default_factory=set)
    start_ms: int = -1
    """When the ongoing transaction started (its first AddPartitions), -1 when none."""
    last_update_ms: int = 0
    last_producer_id: int = -1
    """The producer id before the last allocation of a new one (KIP-360 retries)."""
    last_producer_epoch: int = -1
    """The epoch before the last bump (a retried InitProducerId gets the same answer)."""
    completing: bool = False

    @property
    def in_prepare(self) -> bool:
        """PrepareCommit or PrepareAbort: markers are being written."""
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def can_bump(self) -> bool:
        """Whether InitProducerId may bump the epoch at once (no transaction in flight)."""
        return self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    def copy(self) -> TransactionMetadata:
        """A copy to change and write before the change is applied (Kafka's
        ``TxnTransitMetadata``)."""
        return dataclasses.replace(self, partitions=set(self.partitions))
