"""Idempotent producers: duplicate detection per (producer id, partition) (producer ids
are allocated by :class:`~seglog.broker.log.cluster_state.BrokerState`).

Duplicate detection follows Kafka's ``ProducerStateManager``: per
(producer id, topic, partition) the last 5 batches' (first sequence, last sequence, base
offset, last offset) are kept in memory; a retried batch matching one gets its original
offsets back (Kafka answers such a DUPLICATE_SEQUENCE with success), a gap or reorder is
error 45 OUT_OF_ORDER_SEQUENCE_NUMBER (so is a newer epoch's first batch not starting at
sequence 0), an older epoch 47 INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import collections
import struct
from typing import NamedTuple

from seglog.broker.protocol import errors as _errors

__all__ = ["BatchIdentity", "ProducerStateTable", "batch_identity"]

_MAX_ENTRIES = 5
_INT32_MAX = 2**31 - 1
_IDENT = struct.Struct(">qhii")  # producerId@43, producerEpoch@51, baseSequence@53, count@57


class BatchIdentity(NamedTuple):
    """Producer fields of a record batch v2 header (-1 when the producer is not idempotent)."""

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int


def batch_identity(records: bytes | bytearray | memoryview) -> BatchIdentity | None:
    """The producer fields of the first batch in ``records`` (record batch v2 offsets
    43/51/53/57), None when too short or not magic 2 (storage rejects those)."""
    if len(records) < 61 or records[16] != 2:
        return None
    pid, epoch, first, count = _IDENT.unpack_from(records, 43)
    if pid < 0 or first < 0:
        return None
    last = (first + max(count, 1) - 1) % (_INT32_MAX + 1)
    return BatchIdentity(pid, epoch, first, last)


class _Entry(NamedTuple):
    first_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


class _ProducerPartition:
    __slots__ = ("entries", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.entries: collections.deque[_Entry] = collections.deque(maxlen=_MAX_ENTRIES)


class ProducerStateTable:
    """Last batches per (producer id, topic, partition), in memory."""

    def __init__(self) -> None:
        self._states: dict[tuple[int, str, int], _ProducerPartition] = {}

    def check(self, topic: str, partition: int, ident: BatchIdentity) -> tuple[int, int, int]:
        """Before appending: ``(error code, base offset, last offset)``. Error 0 with
        offsets >= 0 means a duplicate (answer with those offsets, do not append); error 0
        with -1 offsets means append; otherwise answer with the error."""
        state = self._states.get((ident.producer_id, topic, partition))
        if state is None:
            return _errors.NONE, -1, -1
        if ident.producer_epoch < state.epoch:
            return _errors.INVALID_PRODUCER_EPOCH, -1, -1
        if ident.producer_epoch > state.epoch:  # new epoch: sequences restart at 0
            if ident.first_sequence != 0:
                return _errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1, -1
            return _errors.NONE, -1, -1
        for entry in state.entries:
            if (entry.first_sequence, entry.last_sequence) == (
                ident.first_sequence,
                ident.last_sequence,
            ):
                return _errors.NONE, entry.base_offset, entry.last_offset
        if state.entries:
            expected = (state.entries[-1].last_sequence + 1) % (_INT32_MAX + 1)
            if ident.first_sequence != expected:
                return _errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1, -1
        return _errors.NONE, -1, -1

    def record(
        self, topic: str, partition: int, ident: BatchIdentity, base_offset: int, last_offset: int
    ) -> None:
        """After a successful append of a batch with this identity."""
        key = (ident.producer_id, topic, partition)
        state = self._states.get(key)
        if state is None or ident.producer_epoch > state.epoch:
            state = self._states[key] = _ProducerPartition(ident.producer_epoch)
        state.entries.append(
            _Entry(ident.first_sequence, ident.last_sequence, base_offset, last_offset)
        )

    def active(self, topic: str, partition: int) -> list[tuple[int, int, int]]:
        """(producer id, epoch, last sequence) of each producer with state on the
        partition (DescribeProducers)."""
        return [
            (pid, state.epoch, state.entries[-1].last_sequence if state.entries else -1)
            for (pid, t, p), state in sorted(self._states.items())
            if (t, p) == (topic, partition)
        ]

    def to_json(self) -> list[list[object]]:
        """Every state as ``[producer id, topic, partition, epoch, [[first seq, last seq,
        base offset, last offset], ...]]`` (the producer-state snapshot)."""
        return [
            [pid, topic, partition, state.epoch, [list(e) for e in state.entries]]
            for (pid, topic, partition), state in self._states.items()
        ]

    def restore(self, rows: list[list[object]], skip: set[tuple[str, int]]) -> None:
        """Load :meth:`to_json` rows, except those of the partitions in ``skip``. Raises
        ValueError on a malformed row."""
        try:
            for pid, topic, partition, epoch, entries in rows:
                if (topic, partition) in skip:
                    continue
                state = _ProducerPartition(int(epoch))  # type: ignore[call-overload]
                for e in entries:  # type: ignore[attr-defined]
                    state.entries.append(_Entry(*(int(x) for x in e)))
                self._states[(int(pid), str(topic), int(partition))] = state  # type: ignore[call-overload]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed producer state: {exc}") from None

    def forget_topic(self, topic: str) -> None:
        """Drop every entry of a deleted topic."""
        for key in [k for k in self._states if k[1] == topic]:
            del self._states[key]
