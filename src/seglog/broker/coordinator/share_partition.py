"""One share partition (KIP-932; Kafka's ``SharePartition``): a share group's view of one
topic partition, built on the partition log's durable subscription (``seglog.storage``).

Kafka's record states map onto the subscription as follows:

- AVAILABLE: at or past the subscription's position, or delivered and due again
  (released, or its lock expired);
- ACQUIRED: delivered by ``Subscription.fetch_offsets_now`` (offsets and redelivery
  counts only, no record decoded) and not yet settled; the acquisition lock is the
  subscription's ack wait (``group.share.record.lock.duration.ms``), and this class
  remembers which member holds each acquired offset and until when;
- ACKNOWLEDGED (ACCEPT, type 1) and ARCHIVED (REJECT, type 3; or delivered
  ``group.share.delivery.count.limit`` times) are both settled: ``Subscription.ack``,
  never delivered again;
- RELEASE (type 2) is ``Subscription.release``: available again at once, its delivery
  count kept (the next acquisition counts it).

The delivery count Kafka reports is the subscription's redelivery count + 1. Every change
is journaled by the subscription before the broker answers (see ``share_state``).

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
from seglog.storage import Log, Subscription

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
        self._held: dict[int, tuple[str, float]] = {}
        """offset -> (member id, lock deadline in ``time.monotonic()`` seconds)."""
        self._lock = threading.Lock()

    # -- acquisition -----------------------------------------------------------------------

    def acquire(self, member: str, max_records: int) -> tuple[list[Acquired], bytes]:
        """Acquire up to ``max_records`` available records for ``member``: the ranges
        acquired (offset order, one delivery count each) and the stored record batches
        holding them (whole batches, as Kafka returns them: the client keeps the acquired
        offsets only). Raises what the subscription and ``Log.read`` raise."""
        taken = self.subscription.fetch_offsets_now(max(1, max_records))
        if not taken:
            return [], b""
        deadline = time.monotonic() + self.lock_ms / 1000
        counts = {offset: redeliveries + 1 for offset, redeliveries in taken}
        with self._lock:
            for o in counts:
                self._held[o] = (member, deadline)
        offsets = sorted(counts)
        ranges: list[Acquired] = []
        for o in offsets:
            last = ranges[-1] if ranges else None
            if last is not None and last.last_offset == o - 1 and last.delivery_count == counts[o]:
                ranges[-1] = last._replace(last_offset=o)
            else:
                ranges.append(Acquired(o, o, counts[o]))
        return ranges, self._batches(offsets)

    def _batches(self, offsets: list[int]) -> bytes:
        """The record batches holding ``offsets`` (sorted), each once, in offset order."""
        runs: list[list[int]] = []
        for o in offsets:
            if runs and o == runs[-1][1] + 1:
                runs[-1][1] = o
            else:
                runs.append([o, o])
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
                        out.append(data[pos:end])
                        covered = batch_last
                    pos = end
                if covered == before:  # nothing more below ``last`` (removed meanwhile)
                    break
        return b"".join(out)

    # -- acknowledgement -------------------------------------------------------------------

    def acknowledge(self, member: str, batches: Sequence[AckBatch]) -> int:
        """Apply ``member``'s acknowledgement batches all or nothing (see the module
        docstring): 0, 42 INVALID_REQUEST or 121 INVALID_RECORD_STATE. Raises what the
        subscription raises (StorageError: nothing of this call applied)."""
        settle: list[int] = []
        release: list[int] = []
        with self._lock:  # validate and claim at once: one acknowledgement per offset
            now = time.monotonic()
            claimed: dict[int, tuple[str, float]] = {}
            for b in batches:
                span = b.last_offset - b.first_offset + 1
                if span < 1 or len(b.types) not in (1, span):
                    return _errors.INVALID_REQUEST
                for i in range(span):
                    kind = b.types[0] if len(b.types) == 1 else b.types[i]
                    if kind not in (GAP, ACCEPT, RELEASE, REJECT):
                        return _errors.INVALID_REQUEST
                    if kind == GAP:
                        continue
                    offset = b.first_offset + i
                    held = self._held.get(offset)
                    if offset in claimed or held is None or held[0] != member or held[1] <= now:
                        return _errors.INVALID_RECORD_STATE
                    claimed[offset] = held
                    (release if kind == RELEASE else settle).append(offset)
            for o in claimed:
                del self._held[o]
        try:
            if settle:
                self.subscription.ack(settle)
        except BaseException:  # not acknowledged: the member still holds them
            with self._lock:
                self._held.update(claimed)
            raise
        if release:
            self.subscription.release(release)
        return _errors.NONE

    def release_member(self, member: str) -> int:
        """Release every record ``member`` holds (it left the group, was fenced, or closed
        its share session, as Kafka's ``releaseAcquiredRecords``); how many."""
        with self._lock:
            mine = [o for o, (m, _) in self._held.items() if m == member]
            for o in mine:
                del self._held[o]
        if mine:
            self.subscription.release(mine)
        return len(mine)

    def expire_locks(self) -> None:
        """Forget locks past their deadline (the subscription redelivers those offsets)."""
        now = time.monotonic()
        with self._lock:
            for o in [o for o, (_, deadline) in self._held.items() if deadline <= now]:
                del self._held[o]

    # -- state -----------------------------------------------------------------------------

    def held(self) -> dict[int, str]:
        """Offsets acquired now (unexpired locks) -> member id."""
        now = time.monotonic()
        with self._lock:
            return {o: m for o, (m, deadline) in sorted(self._held.items()) if deadline > now}

    def next_lock_expiry_s(self) -> float | None:
        """Seconds until the subscription has a record due again (0: one is), or None."""
        return self.subscription.next_expiry_s()

    def start_offset(self) -> int:
        """The share-partition start offset: the lowest unsettled offset, else the next
        offset to deliver."""
        pending = self.subscription.pending()
        return min(pending) if pending else self.subscription.position
