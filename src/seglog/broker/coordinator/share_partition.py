"""One share partition (KIP-932; Kafka's ``SharePartition``): a share group's view of one
topic partition, built on the partition log's durable subscription (``seglog.storage``).

Kafka's record states map onto the subscription as follows:

- AVAILABLE: at or past the subscription's position, or delivered and due again
  (released, or its lock expired);
- ACQUIRED: delivered by ``Subscription.fetch_ranges_now`` (offset ranges and redelivery
  counts only, found from the record batch headers: no record decoded) and not yet
  settled; the acquisition lock is the subscription's ack wait
  (``group.share.record.lock.duration.ms``), and this class remembers which member
  holds each acquired range and until when (a ``RangeMap``: one entry per acquired
  range, split only when part of it is acknowledged, as Kafka's in-flight batches);
- ACKNOWLEDGED (ACCEPT, type 1) and ARCHIVED (REJECT, type 3; or delivered
  ``group.share.delivery.count.limit`` times) are both settled: ``Subscription.ack``,
  never delivered again;
- RELEASE (type 2) is ``Subscription.release``: available again at once, its delivery
  count kept (the next acquisition counts it).

The delivery count Kafka reports is the subscription's redelivery count + 1. Every change
is journaled by the subscription before the broker answers (see ``share_state``).

New records are acquired in whole stored record batches, as Kafka's
``SharePartition.acquire`` does: ``MaxRecords`` (and the in-flight limit) is a soft limit
that the last batch may pass, so a ShareFetch answers with the stored batches unchanged
and the client keeps every record of them; redelivered ranges may cover part of a batch
(the client keeps the acquired offsets only).

Rules, as Kafka's ``SharePartition.acknowledge``: an acknowledgement batch is a range
``first..last`` with one type for the whole range or one type per offset; every offset
of it typed 1-3 must be acquired by the acknowledging member with an unexpired lock,
else the partition's acknowledgement fails as a whole with 121 INVALID_RECORD_STATE and
nothing of it applies; a type outside 0-3, ``first > last`` or a types array of another
length is 42 INVALID_REQUEST. Gap offsets (type 0: no record there) are ignored.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

from seglog.broker.protocol import errors as _errors
from seglog.storage import Log, RangeMap, Subscription

__all__ = ["ACCEPT", "GAP", "REJECT", "RELEASE", "AckBatch", "Acquired", "SharePartition"]

GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (bytes after this field)
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a v2 record batch
_READ_BYTES = 1 << 20
"""Bytes asked of one ``Log.read`` while collecting the batches of acquired records: a
read is cut to whole batches below its ``upper`` offset only after it is read, so asking
for the rest of the segment (it was 64 MiB) made every acquisition read the whole backlog
(~22 MB for 200,000 records of 100 B: 44k records/s). Reads repeat until the run is
covered (at least one batch each)."""


class AckBatch(NamedTuple):
    """One acknowledgement batch as the wire has it."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


class Acquired(NamedTuple):
    """A range of acquired offsets sharing one delivery count (ShareFetch's
    ``AcquiredRecords``)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    """``group``'s share partition of ``topic``-``partition`` over ``subscription`` (of
    ``log``). ``lock_ms``: the acquisition lock duration. Thread-safe: the broker calls
    :meth:`acquire` and :meth:`acknowledge` (journal writes and fsyncs, in the calling
    thread) from worker threads, the rest from the event loop; a lock guards who holds
    which offset."""

    def __init__(
        self,
        group: str,
        topic: str,
        partition: int,
        *,
        log: Log,
        subscription: Subscription,
        lock_ms: int,
    ) -> None:
        self.group = group
        self.topic = topic
        self.partition = partition
        self.log = log
        self.subscription = subscription
        self.lock_ms = lock_ms
        self._held: RangeMap[tuple[str, float]] = RangeMap()
        """Acquired ranges -> (member id, lock deadline in ``time.monotonic()`` seconds)."""
        self._lock = threading.Lock()
        self.acquired_records = 0
        """Records acquired (deliveries, redeliveries included) since it was opened."""
        self.acknowledged: dict[int, int] = {ACCEPT: 0, RELEASE: 0, REJECT: 0}
        """Records acknowledged since it was opened, by acknowledgement type."""

    # -- acquisition -----------------------------------------------------------------------

    def acquire(
        self, member: str, max_records: int, *, durable: bool = True, max_bytes: int | None = None
    ) -> tuple[list[Acquired], bytes]:
        """Acquire up to ``max_records`` available records for ``member``: the ranges
        acquired (offset order, one delivery count each) and the stored record batches
        holding them (whole batches, as Kafka returns them: the client keeps the acquired
        offsets only). ``max_bytes``: new records stop once their batches reach it, at
        least one batch. ``durable=False``: journaled, not yet fsynced (the caller runs
        ``subscription.sync()`` before it answers). Raises what the subscription and
        ``Log.read`` raise."""
        taken = self.subscription.fetch_ranges_now(
            max(1, max_records), whole_batches=True, durable=durable, max_bytes=max_bytes
        )
        if not taken:
            return [], b""
        deadline = time.monotonic() + self.lock_ms / 1000
        with self._lock:
            for first, last, _count in taken:
                self._held.cut(first, last)  # an expired lock of the previous delivery
                self._held.add(first, last, (member, deadline))
                self.acquired_records += last - first + 1
        ranges: list[Acquired] = []
        for first, last, redeliveries in sorted(taken):
            prev = ranges[-1] if ranges else None
            if (
                prev is not None
                and prev.last_offset == first - 1
                and (prev.delivery_count == redeliveries + 1)
            ):
                ranges[-1] = prev._replace(last_offset=last)
            else:
                ranges.append(Acquired(first, last, redeliveries + 1))
        return ranges, self._batches([(r.first_offset, r.last_offset) for r in ranges])

    def _batches(self, runs: list[tuple[int, int]]) -> bytes:
        """The record batches holding the offsets of ``runs`` (sorted, inclusive), each
        once, in offset order."""
        out: list[bytes] = []
        covered = -1  # last offset of the last batch kept
        for first, last in runs:
            while covered < last:
                before = covered
                data = self.log.read(max(first, covered + 1), _READ_BYTES, upper=last + 1)
                pos = 0
                while pos + _BATCH_HEAD.size <= len(data):
                    base, length = _BATCH_HEAD.unpack_from(data, pos)
                    end = pos + 12 + length
                    if end > len(data) or pos + 27 > len(data):
                        break
                    batch_last = base + _LAST_DELTA.unpack_from(data, pos + 23)[0]
                    if batch_last > covered and batch_last >= first:
                        out.append(data[pos:end] if pos or end < len(data) else data)
                        covered = batch_last
                    pos = end
                if covered == before:  # nothing more below ``last`` (removed meanwhile)
                    break
        return out[0] if len(out) == 1 else b"".join(out)

    # -- acknowledgement -------------------------------------------------------------------

    def acknowledge(self, member: str, batches: Sequence[AckBatch], *, durable: bool = True) -> int:
        """Apply ``member``'s acknowledgement batches all or nothing (see the module
        docstring): 0, 42 INVALID_REQUEST or 121 INVALID_RECORD_STATE. ``durable=False``:
        journaled, not yet fsynced (the caller runs ``subscription.sync()`` before it
        answers). Raises what the subscription raises (StorageError: nothing of this
        call applied)."""
        settle: list[tuple[int, int]] = []
        release: list[tuple[int, int]] = []
        with self._lock:  # validate and claim at once: one acknowledgement per offset
            now = time.monotonic()
            claimed: RangeMap[int] = RangeMap()
            for b in batches:
                span = b.last_offset - b.first_offset + 1
                if span < 1 or len(b.types) not in (1, span):
                    return _errors.INVALID_REQUEST
                for first, last, kind in _typed_runs(b):
                    if kind not in (GAP, ACCEPT, RELEASE, REJECT):
                        return _errors.INVALID_REQUEST
                    if kind == GAP:
                        continue
                    held = self._held.overlapping(first, last)
                    if (
                        claimed.overlapping(first, last)
                        or sum(t - f + 1 for f, t, _ in held) != last - first + 1
                        or any(m != member or d <= now for _f, _t, (m, d) in held)
                    ):
                        return _errors.INVALID_RECORD_STATE
                    claimed.add(first, last, kind)
                    (release if kind == RELEASE else settle).append((first, last))
            taken: list[tuple[int, int, tuple[str, float]]] = []
            for first, last, _kind in claimed:
                taken.extend(self._held.cut(first, last)[0])
        try:
            if settle:
                self.subscription.ack_ranges(settle, durable=durable)
        except BaseException:  # not acknowledged: the member still holds them
            with self._lock:
                for first, last, value in taken:
                    self._held.cut(first, last)
                    self._held.add(first, last, value)
            raise
        if release:
            self.subscription.release_ranges(release)
        with self._lock:
            for first, last, kind in claimed:
                self.acknowledged[kind] += last - first + 1
        return _errors.NONE

    def release_member(self, member: str) -> int:
        """Release every record ``member`` holds (it left the group, was fenced, or closed
        its share session, as Kafka's ``releaseAcquiredRecords``); how many."""
        with self._lock:
            mine = [(f, t) for f, t, (m, _) in self._held if m == member]
            for f, t in mine:
                self._held.cut(f, t)
        return self.subscription.release_ranges(mine) if mine else 0

    def expire_locks(self) -> None:
        """Forget locks past their deadline (the subscription redelivers those offsets)."""
        now = time.monotonic()
        with self._lock:
            for f, t in [(f, t) for f, t, (_, deadline) in self._held if deadline <= now]:
                self._held.cut(f, t)

    # -- state -----------------------------------------------------------------------------

    def held(self) -> dict[int, str]:
        """Offsets acquired now (unexpired locks) -> member id."""
        now = time.monotonic()
        with self._lock:
            return {o: m for o, (m, deadline) in self._held.items() if deadline > now}

    def in_flight(self) -> int:
        """How many records are acquired now (unexpired locks)."""
        now = time.monotonic()
        with self._lock:
            return sum(t - f + 1 for f, t, (_m, deadline) in self._held if deadline > now)

    def next_lock_expiry_s(self) -> float | None:
        """Seconds until the subscription has a record due again (0: one is), or None."""
        return self.subscription.next_expiry_s()

    def start_offset(self) -> int:
        """The share-partition start offset: the lowest unsettled offset, else the next
        offset to deliver."""
        lowest = self.subscription.lowest_pending()
        return self.subscription.position if lowest is None else lowest


def _typed_runs(batch: AckBatch) -> list[tuple[int, int, int]]:
    """An acknowledgement batch as runs ``(first, last, type)`` of one type each."""
    if len(batch.types) == 1:
        return [(batch.first_offset, batch.last_offset, batch.types[0])]
    runs: list[tuple[int, int, int]] = []
    for i, kind in enumerate(batch.types):
        offset = batch.first_offset + i
        if runs and runs[-1][2] == kind:
            runs[-1] = (runs[-1][0], offset, kind)
        else:
            runs.append((offset, offset, kind))
    return runs
