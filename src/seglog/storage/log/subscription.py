"""Durable subscriptions (NATS Streaming's durable subscribers) over one partition log.

``Log.subscribe(name, ack_wait_ms=..., max_in_flight=..., start=...)`` returns a
:class:`Subscription`: ``fetch`` hands out :class:`Delivery` objects (first those whose
``ack_wait`` expired without an ack, redelivered with ``redelivery_count + 1``, then new
messages from the subscription's position), at most ``max_in_flight`` unacknowledged at
any time; ``ack`` settles them. At-least-once: a message is delivered again until its ack
returned, across restarts and kill -9. ``fetch_offsets_now`` is ``fetch_now`` (``fetch``
without waiting) giving ``(offset, redelivery_count)`` pairs instead, no message decoded.

State file: ``<partition>/subscriptions/<name>.sub``, an append-only journal of lines (a
snapshot, then one line of offset ranges per change; see ``subscription_state``). An ack
appends one short line, so it costs O(1) amortised: once the journal outgrows four times
its snapshot (and 64 KiB) it is compacted, i.e. replaced by one snapshot line through the
atomic writer (``fileio.files.write_small_file``: temp file, fsync, rename, fsync dir);
the compacted size is O(runs in flight), paid for by the appends that preceded it.
Opening a subscription and ``close`` compact too; the compaction at open drops a torn
last line (never acknowledged to the caller).

In memory, delivered-unacknowledged offsets are runs (``range_map.RangeMap``: one entry
per run of consecutive offsets with one redelivery count and deadline, split when part of
it is acknowledged or released), as Kafka's ``SharePartition`` tracks in-flight batches;
``fetch_ranges_now``, ``ack_ranges`` and ``release_ranges`` take and give ranges.

Durability follows the log's policy: under the default (fsync before acknowledge) every
``fetch`` that delivers and every ``ack`` fsyncs the journal before returning (group
commit: the fsync runs outside the subscription's lock and covers every line written
before it, so concurrent callers share it; ``durable=False`` and :meth:`Subscription.sync`
let a caller journal several changes and fsync once); under
``flush_messages`` / ``flush_ms`` the lines reach the page cache only (they survive a
kill -9, not a power loss) and are fsynced at compaction and ``close``.

``release(offsets)`` hands delivered messages back at once (due now: the next ``fetch``
redelivers them, counted); ``max_deliveries`` (``Log.subscribe``) caps how often one
message is delivered: one whose ack wait expired or that was released after its last
allowed delivery is archived instead (journaled as an ack, never delivered again), as a
queue's dead-letter limit without the dead-letter copy.

Expiry deadlines are in memory only (``clock()``, monotonic seconds; tests monkeypatch
this module's ``clock``): after a restart every unacknowledged message is due at once
and its next delivery counts as a redelivery. Offsets below the log start offset
(retention, DeleteRecords) leave the pending set; a pending offset that is no longer
stored (compacted or deleted) is dropped when its redelivery finds it gone.

Thread-safety: every method may be called from any thread; concurrent ``fetch`` calls
on one subscription get disjoint deliveries.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import operator
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from seglog.errors import (
    InvalidOffsetError,
    LogClosedError,
    NotFoundError,
    StorageError,
)
from seglog.storage.fileio import files
from seglog.storage.log import isolation
from seglog.storage.log.range_map import RangeMap, runs_of
from seglog.storage.log.subscription_state import (
    NAME,
    SUBSCRIPTIONS_DIR,
    SUFFIX,
    backup_states,
    count_runs,
    floor,
    line,
    load,
    snapshot,
    validate_subscription_name,
)
from seglog.storage.record.batch import HEADER_SIZE, parse_header
from seglog.storage.record.message import OFFSET_NEWEST, OFFSET_OLDEST, Message

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.log import Log

__all__ = [
    "SUBSCRIPTIONS_DIR",
    "Delivery",
    "Subscription",
    "Subscriptions",
    "backup_states",
    "clock",
    "floor",
    "validate_subscription_name",
]

_COMPACT_MIN_BYTES = 64 << 10
_BATCH_READ_BYTES = 1 << 20
"""Bytes read at a time while walking batch headers for whole-batch deliveries (at
least one whole batch each)."""
_CONTROL = 0x20
"""Record batch attributes bit 5: a control batch (transaction markers)."""

_logger = logging.getLogger(__name__)

clock: Callable[[], float] = time.monotonic
"""Monotonic seconds for ack-wait deadlines (a module attribute so tests can fake it)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed out by :meth:`Subscription.fetch`."""

    message: Message
    """The message (offset, timestamp, key, value, headers)."""
    redelivery_count: int
    """0 on the first delivery, + 1 on each redelivery (ack wait expired, or a restart)."""

    @property
    def offset(self) -> int:
        """The message's offset (what ``ack`` takes)."""
        return self.message.offset


def _array_runs(offsets: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """The runs of consecutive values of an ascending offsets array (vectorised)."""
    n = len(offsets)
    if n == 0:
        return []
    breaks = np.flatnonzero(np.diff(offsets) != 1)
    firsts = [int(offsets[0]), *offsets[breaks + 1].tolist()]
    lasts = [*offsets[breaks].tolist(), int(offsets[-1])]
    return list(zip(firsts, lasts, strict=True))


class Subscription:
    """A durable subscription to one log: ``fetch`` deliveries, ``ack`` them.

    Made by ``Log.subscribe``; see this module's docstring for the state file and the
    delivery rules. Usable as a context manager (``close`` on exit).
    """

    def __init__(
        self,
        log: Log,
        owner: Subscriptions,
        name: str,
        path: pathlib.Path,
        *,
        ack_wait_ms: int,
        max_in_flight: int,
        position: int,
        pending: dict[int, int],
        max_deliveries: int | None = None,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> None:
        self._log = log
        self._isolation: IsolationLevel = isolation_level
        self._max_deliveries = max_deliveries
        self._owner = owner
        self._path = path
        self._name = name
        self._ack_wait_ms = ack_wait_ms
        self._max_in_flight = max_in_flight
        self._lock = threading.RLock()
        self._closed = False
        self._position = position
        self._flight: RangeMap[tuple[int, float]] = RangeMap()
        """In flight (delivered, unacknowledged), by runs of consecutive offsets: value
        (redelivery count so far, deadline in ``clock()`` seconds)."""
        self._heap: list[tuple[float, int]] = []
        """(deadline, first offset of a run), lazily cleaned: stale once no run starts
        there or its deadline differs."""
        for first, last, count in count_runs(pending):
            self._flight.add(first, last, (count, float("-inf")))  # due at once
            self._heap.append((float("-inf"), first))
        self._waiters: set[Future[None]] = set()
        self._seen_log_start = log.log_start_offset
        self._archived = 0
        self._durable = log.config.fsync_before_ack
        self._fd = -1
        self._journal_bytes = 0
        self._snapshot_bytes = 0
        self._sync_lock = threading.Lock()
        """Held while the journal's fd is fsynced, swapped or closed (taken after
        ``_lock`` when both are: compaction, close); the fsync itself runs under this one
        only, so other calls keep journaling meanwhile (group commit)."""
        self._written = 0
        """Journal appends made (the sequence number of the last one)."""
        self._synced = 0
        """Appends known durable: every one up to this number is fsynced."""
        self._compact()

    # -- properties ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The subscription's name (its file: ``subscriptions/<name>.sub``)."""
        return self._name

    @property
    def ack_wait_ms(self) -> int:
        """Milliseconds a delivery may stay unacknowledged before it is redelivered."""
        return self._ack_wait_ms

    @property
    def max_in_flight(self) -> int:
        """Most delivered-but-unacknowledged messages at any time."""
        return self._max_in_flight

    @property
    def isolation_level(self) -> IsolationLevel:
        """What ``fetch`` reads (``Log.subscribe``): read_committed delivers committed
        records only, up to the last stable offset."""
        return self._isolation

    @property
    def max_deliveries(self) -> int | None:
        """Most deliveries of one message (first + redeliveries); None: no limit."""
        return self._max_deliveries

    @property
    def position(self) -> int:
        """The next offset to deliver for the first time."""
        with self._lock:
            self._drop_below_log_start()
            return self._position

    @property
    def archived(self) -> int:
        """Offsets archived since this object was made: due again after their last
        allowed delivery (``max_deliveries``), never delivered again. A count for
        monitoring (not persisted)."""
        return self._archived

    @property
    def closed(self) -> bool:
        """``close`` (or ``Log.unsubscribe`` / ``Log.close``) was called."""
        return self._closed

    @property
    def waiting(self) -> int:
        """How many fetches are parked on this subscription right now: blocking ``fetch``
        calls (and ``seglog.aio.fetch``) that found nothing and wait, i.e. outstanding
        :meth:`wake_future` futures. A fetch registers before it looks, so a count >= 1
        means any publish, ack or close from then on reaches it: what a test or a monitor
        polls instead of sleeping. Read-only, a snapshot."""
        with self._lock:
            return len(self._waiters)

    def pending(self) -> dict[int, int]:
        """Delivered but not yet acknowledged offsets -> their redelivery count so far."""
        with self._lock:
            self._drop_below_log_start()
            return {o: c for o, (c, _) in self._flight.items()}

    def lowest_pending(self) -> int | None:
        """The lowest delivered-but-unacknowledged offset (None when none), without
        building :meth:`pending` (O(1))."""
        with self._lock:
            self._drop_below_log_start()
            return self._flight.first()

    # -- fetching --------------------------------------------------------------------------

    def fetch(self, max_count: int, timeout_s: float) -> list[Delivery]:
        """Up to ``max_count`` deliveries: first messages whose ack wait expired (oldest
        deadline first, then by offset; ``redelivery_count`` + 1), then new messages from
        ``position`` while fewer than ``max_in_flight`` are unacknowledged. When there is
        none, waits up to ``timeout_s`` seconds for new data, an ack freeing room, or an
        expiry; ``[]`` on timeout. Under the default policy the deliveries are durable
        (journal fsynced) when it returns. Raises LogClosedError (the subscription or log
        closed, also while waiting), ValueError on ``max_count`` < 1."""
        if max_count < 1:
            raise ValueError("max_count must be >= 1")
        deadline = time.monotonic() + timeout_s
        while True:
            wake = self.wake_future()
            try:
                out = self.fetch_now(max_count)
                if out:
                    return out
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                expiry = self.next_expiry_s()
                wait = remaining if expiry is None else min(remaining, expiry)
                with contextlib.suppress(TimeoutError):
                    wake.result(timeout=max(wait, 0.0))
            finally:
                wake.cancel()

    def fetch_now(self, max_count: int) -> list[Delivery]:
        """As :meth:`fetch` without waiting (what an event loop polls between wakes)."""
        runs, messages = self._take(max_count, decode=True, durable=True)
        return [Delivery(messages[o], c) for f, to, c in runs for o in range(f, to + 1)]

    def fetch_offsets_now(self, max_count: int, *, durable: bool = True) -> list[tuple[int, int]]:
        """As :meth:`fetch_now` (the same deliveries in the same order, the same state
        changes and journal lines; the same errors but a message's decoding) but only
        ``[(offset, redelivery_count), ...]``, no message decoded: new offsets come from
        the vectorised decoder's offsets column (``Log.consume_columns``), and an expired
        offset is only looked up (still stored, else archived as by ``fetch_now``). For a
        caller that reads the stored record batches itself. ``durable=False``: return
        once the deliveries are journaled (page cache), before their fsync (:meth:`sync`
        makes them durable; so does any later durable call)."""
        runs = self._take(max_count, decode=False, durable=durable)[0]
        return [(o, c) for f, to, c in runs for o in range(f, to + 1)]

    def fetch_ranges_now(
        self,
        max_count: int,
        *,
        whole_batches: bool = False,
        durable: bool = True,
        max_bytes: int | None = None,
    ) -> list[tuple[int, int, int]]:
        """As :meth:`fetch_offsets_now`, as runs: ``[(first, last, redelivery_count),
        ...]`` of consecutive stored offsets, in delivery order. ``whole_batches``: new
        deliveries end at a stored record batch's end, past ``max_count`` and
        ``max_in_flight`` if need be (both are then soft limits for the last batch, as
        Kafka's ``SharePartition.acquire`` treats ``MaxRecords``), and are found from the
        batch headers, no record decoded (a compacted or control batch excepted). For a
        caller that hands out whole stored batches (the broker's share partitions).
        ``max_bytes`` (with ``whole_batches``): new deliveries stop once their batches
        reach that many bytes, at least one batch (Kafka's fetch ``MaxBytes``)."""
        return self._take(
            max_count, decode=False, durable=durable, whole_batches=whole_batches,
            max_bytes=max_bytes,
        )[0]  # fmt: skip

    def _take(
        self,
        max_count: int,
        *,
        decode: bool,
        durable: bool,
        whole_batches: bool = False,
        max_bytes: int | None = None,
    ) -> tuple[list[tuple[int, int, int]], dict[int, Message]]:
        """The one delivery step of the ``fetch_*_now`` methods: runs ``(first, last,
        redelivery count)`` (redeliveries, then new offsets), and when ``decode`` the
        message of each offset (else ``{}``); ``durable``: fsynced (group commit,
        outside the lock) before it returns."""
        if max_count < 1:
            raise ValueError("max_count must be >= 1")
        with self._lock:
            self._check_open()
            self._drop_below_log_start()
            now = clock()
            records: list[dict[str, Any]] = []
            out, messages = self._redeliver(now, max_count, records, decode=decode)
            delivered = sum(last - first + 1 for first, last, _ in out)
            room = min(max_count - delivered, self._max_in_flight - len(self._flight))
            if room > 0:
                old_position = self._position
                if whole_batches and self._isolation == "read_uncommitted":
                    runs, nxt = self._batch_runs(self._position, room, max_bytes)
                else:  # read_committed: the LSO bound and aborted records need a decode
                    cols = self._log.consume_columns(
                        self._position, room, isolation_level=self._isolation
                    )
                    nxt = cols.next_offset
                    runs = _array_runs(cols.offsets)
                    if decode:
                        offsets: list[int] = cols.offsets.tolist()
                        messages.update(zip(offsets, cols.messages(), strict=True))
                due = now + self._ack_wait_ms / 1000.0
                for first, last in runs:
                    self._flight.add(first, last, (0, due))
                    heapq.heappush(self._heap, (due, first))
                    out.append((first, last, 0))
                self._position = nxt
                if runs or nxt != old_position:
                    records.append({"D": [[f, to] for f, to in runs], "p": nxt})
            if records:
                self._append(records)
            seq = self._written
        if out and durable:
            self._sync_through(seq)
        return out, messages

    def _batch_runs(
        self, position: int, room: int, max_bytes: int | None
    ) -> tuple[list[tuple[int, int]], int]:
        """New offsets from ``position``: at least ``room`` (fewer at the high watermark,
        or once the batches reach ``max_bytes``, at least one batch) up to the end of the
        stored batch holding the ``room``-th: ``(runs, next position)``. A batch whose
        record count is its offset span and that is no control batch holds every offset
        of that span; the others are decoded."""
        runs: list[tuple[int, int]] = []
        taken, nxt, size = 0, position, 0
        budget = max_bytes if max_bytes is not None else 1 << 62
        while taken < room and size < budget:
            data = self._log.read(nxt, _BATCH_READ_BYTES)
            if not data:
                break
            pos = 0
            while pos + HEADER_SIZE <= len(data) and taken < room and size < budget:
                h = parse_header(data, pos)
                if h.size < HEADER_SIZE or pos + h.size > len(data):
                    break
                pos += h.size
                size += h.size
                first, last = max(h.base_offset, nxt), h.last_offset
                if last < first:
                    continue
                if h.record_count == h.last_offset_delta + 1 and not h.attributes & _CONTROL:
                    found = [(first, last)]
                else:  # gaps (compaction) or a control batch: what a reader is handed
                    cols = self._log.consume_columns(first, last - first + 1)
                    offs = cols.offsets
                    found = _array_runs(offs[offs <= last])
                for f, to in found:
                    if runs and runs[-1][1] == f - 1:
                        runs[-1] = (runs[-1][0], to)
                    else:
                        runs.append((f, to))
                    taken += to - f + 1
                nxt = last + 1
            if pos == 0:
                break
        return runs, nxt

    def _redeliver(
        self, now: float, max_count: int, records: list[dict[str, Any]], *, decode: bool
    ) -> tuple[list[tuple[int, int, int]], dict[int, Message]]:
        """Take up to ``max_count`` expired offsets (runs off the heap, by deadline then
        offset; the last run split to fit) and look them up (read their messages when
        ``decode``): ``(first, last, redelivery count)`` per redelivered run and the
        messages (``{}`` unless ``decode``); their journal records go to ``records``.
        Offsets no longer stored, or already delivered ``max_deliveries`` times, leave
        the flight (journaled as acks)."""
        due: list[tuple[int, int, int, float]] = []
        taken = 0
        heap, flight = self._heap, self._flight
        while heap and taken < max_count and heap[0][0] <= now:
            deadline, first = heapq.heappop(heap)
            run = flight.run_at(first)
            if run is None or run[1][1] != deadline:
                continue  # stale
            last, (count, _) = run
            last = min(last, first + max_count - taken - 1)
            _removed, rest = flight.cut(first, last)
            for f, _l, value in rest:  # the rest of the run stays due
                heapq.heappush(heap, (value[1], f))
            due.append((first, last, count, deadline))
            taken += last - first + 1
        if not due:
            return [], {}
        messages: dict[int, Message] = {}
        try:
            stored = [self._stored_runs(first, last, messages, decode=decode)
                      for first, last, _c, _d in due]  # fmt: skip
        except BaseException:  # CorruptRecordError, LogClosedError...: still due later
            for first, last, count, deadline in due:
                flight.add(first, last, (count, deadline))
                heapq.heappush(heap, (deadline, first))
            raise
        new_deadline = now + self._ack_wait_ms / 1000.0
        out: list[tuple[int, int, int]] = []
        gone: list[list[int]] = []
        limit = self._max_deliveries
        for (first, last, count, _deadline), hits in zip(due, stored, strict=True):
            if limit is not None and count + 1 >= limit:
                gone.append([first, last])  # delivered max_deliveries times: archived
                self._archived += last - first + 1
                continue
            at = first
            for f, to in hits:
                if f > at:
                    gone.append([at, f - 1])  # no longer stored
                flight.add(f, to, (count + 1, new_deadline))
                heapq.heappush(heap, (new_deadline, f))
                out.append((f, to, count + 1))
                at = to + 1
            if at <= last:
                gone.append([at, last])
        if gone:
            records.append({"A": gone})
        if out:
            records.append({"R": [[f, to] for f, to, _ in out]})
        return out, messages

    def _stored_runs(
        self, first: int, last: int, messages: dict[int, Message], *, decode: bool
    ) -> list[tuple[int, int]]:
        """The runs of offsets of ``first..last`` still stored; their messages go to
        ``messages`` when ``decode``."""
        start = self._log.log_start_offset
        first = max(first, start)  # below it: removed by retention since
        if first > last:
            return []
        try:
            cols = self._log.consume_columns(first, last - first + 1)
        except InvalidOffsetError:  # below the log start since (retention)
            return []
        offs = cols.offsets
        keep = offs <= last
        if decode:
            hits = set(offs[keep].tolist())
            messages.update((m.offset, m) for m in cols.messages() if m.offset in hits)
        return _array_runs(offs[keep])

    def _drop_below_log_start(self) -> None:
        start = self._log.log_start_offset
        if start == self._seen_log_start:  # the cut below only when retention moved it
            return
        self._seen_log_start = start
        self._position = max(self._position, start)
        _removed, rest = self._flight.cut(-1, start - 1)
        for f, _l, value in rest:
            heapq.heappush(self._heap, (value[1], f))

    def next_expiry_s(self) -> float | None:
        """Seconds until the earliest unacknowledged delivery expires (0 if one already
        has), None when nothing is in flight."""
        with self._lock:
            heap = self._heap
            while heap:
                deadline, first = heap[0]
                run = self._flight.run_at(first)
                if run is not None and run[1][1] == deadline:
                    return max(0.0, deadline - clock())
                heapq.heappop(heap)
            return None

    def wake_future(self) -> Future[None]:
        """A future completing when a fetch may find something it could not before: new
        data at ``position`` (only while below ``max_in_flight``), an ack, or the
        subscription or the log closing (LogClosedError). Expiries do not complete it:
        wait at most :meth:`next_expiry_s`. Cancel it when done. ``seglog.aio.fetch``
        awaits it; register it *before* a ``fetch_now`` that found nothing."""
        fut: Future[None] = Future()
        with self._lock:
            if self._closed:
                fut.set_exception(LogClosedError(f"subscription {self._name} is closed"))
                return fut
            self._waiters.add(fut)
            fut.add_done_callback(self._forget)
            if len(self._flight) < self._max_in_flight:
                at = self._position
                if self._isolation == "read_committed" and at >= self._log.last_stable_offset:
                    at = max(at, self._log.high_watermark)  # held by a transaction: next append
                data = self._log.wait_for_offset(at)
                data.add_done_callback(lambda d: _chain(d, fut))
                fut.add_done_callback(lambda _: data.cancel())
        return fut

    def _forget(self, fut: Future[None]) -> None:
        with self._lock:
            self._waiters.discard(fut)

    def _wake_all(self, exc: BaseException | None = None) -> None:
        with self._lock:
            waiters, self._waiters = list(self._waiters), set()
        for fut in waiters:
            with contextlib.suppress(InvalidStateError):
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)

    # -- acknowledging ---------------------------------------------------------------------

    def ack(self, offsets: int | Iterable[int], *, durable: bool = True) -> int:
        """Acknowledge one offset or several: they are never delivered again once this
        returns (durable under the default policy). Offsets below ``position`` that are
        not in flight (already acknowledged, or dropped by retention) are ignored; an
        offset at or above ``position`` was never delivered: ValueError, and nothing of
        this call is acknowledged. Returns how many were in flight (now acknowledged).
        LogClosedError when closed; StorageError when the state cannot be written
        (nothing of this call acknowledged then). ``durable=False``: return once the
        acks are journaled (page cache), before their fsync: the caller answers anyone
        only after :meth:`sync` (one fsync for several calls)."""
        with self._lock:
            batch = self._delivered(offsets)
        return self.ack_ranges(runs_of(batch), durable=durable)

    def ack_ranges(self, ranges: Iterable[tuple[int, int]], *, durable: bool = True) -> int:
        """:meth:`ack` of every offset of the inclusive ``(first, last)`` ranges, cost
        per run rather than per offset (one journal line of ranges). The same rules,
        errors and result; ValueError also for a range with ``first > last``."""
        with self._lock:
            wanted = self._delivered_ranges(ranges)
            removed: list[tuple[int, int, tuple[int, float]]] = []
            for f, to in wanted:
                cut, rest = self._flight.cut(f, to)
                removed.extend(cut)
                for rf, _rl, value in rest:
                    heapq.heappush(self._heap, (value[1], rf))
            acked = sum(to - f + 1 for f, to, _ in removed)
            if acked:
                try:
                    self._append([{"A": [[f, to] for f, to, _ in removed]}])
                except BaseException:
                    self._restore(removed)  # not acknowledged: delivered again
                    raise
            seq = self._written
        if acked:
            self._wake_all()
            if durable:
                try:
                    self._sync_through(seq)
                except BaseException:
                    with self._lock:
                        self._restore(removed)  # not acknowledged: delivered again
                    raise
        return acked

    def _restore(self, runs: list[tuple[int, int, tuple[int, float]]]) -> None:
        """Put runs taken out of the flight back (an ack that did not happen)."""
        for f, to, value in runs:
            if not self._flight.overlapping(f, to):
                self._flight.add(f, to, value)
                heapq.heappush(self._heap, (value[1], f))

    def sync(self) -> None:
        """Block until every change journaled so far (deliveries, acks) is durable under
        the log's policy (default: fsynced; relaxed policies: no-op). Concurrent callers
        share one fsync (group commit). What ``ack(..., durable=False)`` and
        ``fetch_offsets_now(..., durable=False)`` leave to their caller. LogClosedError
        when closed before; StorageError when the fsync fails (the subscription is then
        closed: reopen it)."""
        with self._lock:
            self._check_open()
            seq = self._written
        self._sync_through(seq)

    def _delivered(self, offsets: int | Iterable[int]) -> list[int]:
        """``offsets`` as a list, checked for :meth:`ack` and :meth:`release` (under the
        lock): LogClosedError when closed; ValueError naming those at or above
        ``position`` (never delivered)."""
        batch = (
            [operator.index(o) for o in offsets]
            if isinstance(offsets, Iterable)
            else [operator.index(offsets)]
        )
        self._check_open()
        self._drop_below_log_start()
        never = [o for o in batch if o >= self._position]
        if never:
            raise ValueError(
                f"subscription {self._name}: offsets {never[:5]} were never delivered "
                f"(position {self._position})"
            )
        return batch

    def release(self, offsets: int | Iterable[int]) -> int:
        """Hand delivered-but-unacknowledged offsets back at once: they are due now, so
        the next ``fetch`` redelivers them (``redelivery_count`` + 1), or archives those
        already delivered ``max_deliveries`` times. Nothing is journaled (after a restart
        every unacknowledged offset is due anyway). Offsets not in flight are ignored;
        one at or above ``position`` was never delivered: ValueError, nothing released.
        Returns how many were in flight (now released). LogClosedError when closed."""
        with self._lock:
            batch = self._delivered(offsets)
        return self.release_ranges(runs_of(batch))

    def release_ranges(self, ranges: Iterable[tuple[int, int]]) -> int:
        """:meth:`release` of every offset of the inclusive ``(first, last)`` ranges,
        cost per run rather than per offset. The same rules, errors and result;
        ValueError also for a range with ``first > last``."""
        with self._lock:
            wanted = self._delivered_ranges(ranges)
            released = 0
            now = float("-inf")
            for first, last in wanted:
                cut, rest = self._flight.cut(first, last)
                for f, _to, value in rest:
                    heapq.heappush(self._heap, (value[1], f))
                for f, to, (count, _deadline) in cut:
                    released += to - f + 1
                    self._flight.add(f, to, (count, now))  # due at once
                    heapq.heappush(self._heap, (now, f))
        if released:
            self._wake_all()
        return released

    def _delivered_ranges(self, ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """``ranges`` as a list, checked for :meth:`ack_ranges` and :meth:`release_ranges`
        (under the lock): LogClosedError when closed; ValueError for one reaching
        ``position`` (never delivered) or empty."""
        wanted = [(operator.index(f), operator.index(to)) for f, to in ranges]
        self._check_open()
        self._drop_below_log_start()
        for f, to in wanted:
            if f > to or to >= self._position:
                raise ValueError(
                    f"subscription {self._name}: offsets {f}..{to} were never delivered "
                    f"(position {self._position})"
                )
        return wanted

    # -- the journal -----------------------------------------------------------------------

    def _append(self, records: list[dict[str, Any]]) -> None:
        """Append ``records`` to the journal (one write, under ``_lock``; sequence number
        ``_written``: :meth:`_sync_through` it for durability); compact when the journal
        outgrew its snapshot. On a write error the journal is cut back to its last whole
        line (a torn line would hide every later one from the next load) and StorageError
        raised."""
        data = b"".join(line(r) for r in records)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            try:
                os.ftruncate(self._fd, self._journal_bytes)
            except OSError:
                self._fail()
            raise StorageError(f"subscription {self._name}: cannot write its state: {e}") from e
        self._journal_bytes += len(data)
        self._written += 1
        if self._journal_bytes > 4 * self._snapshot_bytes + _COMPACT_MIN_BYTES:
            try:
                self._compact()  # fsyncs (atomic writer)
            except OSError as e:  # the journal is intact: keep appending to it
                _logger.warning("cannot compact subscription %s: %s", self._path, e)

    def _sync_through(self, seq: int) -> None:
        """Return once journal append ``seq`` is durable (default policy: fsynced; else
        at once). Group commit: the fsync runs under ``_sync_lock`` only and covers every
        append written before it, so callers that queued meanwhile find theirs done. An
        fsync error closes the subscription (the kernel may have dropped the pages:
        reopen it) and raises StorageError."""
        if not self._durable:
            return
        with self._sync_lock:
            if self._synced >= seq:
                return
            if self._fd < 0:  # closed without a compaction covering ``seq`` (failed)
                raise LogClosedError(f"subscription {self._name} is closed")
            target = self._written  # appends complete before this read are in the file
            try:
                os.fdatasync(self._fd)
            except OSError as e:
                error = e
            else:
                self._synced = max(self._synced, target)
                return
        with self._lock:
            self._fail()
        raise StorageError(f"subscription {self._name}: fsync failed: {error}") from error

    def _fail(self) -> None:
        """Stop using the journal after an error that leaves it uncertain (under ``_lock``)."""
        self._closed = True
        with self._sync_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
        self._wake_all(LogClosedError(f"subscription {self._name} failed: reopen it"))

    def _compact(self) -> None:
        """Replace the journal with one snapshot line (atomic writer, fsynced), reopen it
        for appends: every append so far is durable then. Under ``_lock`` (or before the
        object is shared)."""
        runs = [(f, to, c) for f, to, (c, _) in self._flight]
        data = snapshot(self._name, self._position, runs)
        with self._sync_lock:
            files.write_small_file(self._path, data)
            fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = fd
            self._synced = self._written
        self._snapshot_bytes = self._journal_bytes = len(data)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"subscription {self._name} is closed")
        self._log._state.check_open()

    def close(self) -> None:
        """Compact the state file (a clean snapshot) and release it; idempotent. Later
        calls raise LogClosedError; ``Log.subscribe`` with the name resumes it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._fd >= 0 and self._path.exists():
                    self._compact()
            finally:
                with self._sync_lock:
                    if self._fd >= 0:
                        os.close(self._fd)
                        self._fd = -1
        self._owner.forget(self)
        self._wake_all(LogClosedError(f"subscription {self._name} closed"))

    def _discard(self) -> None:
        """Close without writing (``unsubscribe``: the file is about to go)."""
        with self._lock:
            self._closed = True
            with self._sync_lock:
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1
        self._wake_all(LogClosedError(f"subscription {self._name} removed"))

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Subscription({self._name!r}, position={self._position}, "
            f"in_flight={len(self._flight)})"
        )


def _chain(source: Future[int], target: Future[None]) -> None:
    if source.cancelled():
        return
    with contextlib.suppress(InvalidStateError):
        exc = source.exception()
        if exc is None:
            target.set_result(None)
        else:
            target.set_exception(exc)


class Subscriptions:
    """The subscriptions of one open log (``Log.subscribe`` and friends): the live
    :class:`Subscription` objects by name, and their directory."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._live: dict[str, Subscription] = {}

    @property
    def directory(self) -> pathlib.Path:
        """``<partition>/subscriptions``."""
        return self._log.directory / SUBSCRIPTIONS_DIR

    def subscribe(
        self,
        name: str,
        *,
        ack_wait_ms: int,
        max_in_flight: int,
        start: int,
        max_deliveries: int | None = None,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> Subscription:
        """See ``Log.subscribe``."""
        isolation.check_level(isolation_level)  # ValueError on an unknown level
        validate_subscription_name(name)
        if (
            ack_wait_ms < 1
            or max_in_flight < 1
            or (max_deliveries is not None and max_deliveries < 1)
        ):
            raise ValueError("ack_wait_ms, max_in_flight and max_deliveries must be >= 1")
        st = self._log._state
        st.check_writable()
        with self._lock:
            live = self._live.get(name)
            if live is not None and not live.closed:
                settings = (
                    live.ack_wait_ms,
                    live.max_in_flight,
                    live.max_deliveries,
                    live.isolation_level,
                )
                if settings != (ack_wait_ms, max_in_flight, max_deliveries, isolation_level):
                    raise ValueError(f"subscription {name} is open with other settings")
                return live
            directory = self.directory
            if not directory.is_dir():
                directory.mkdir(exist_ok=True)
                files.fsync_dir(self._log.directory)
            path = directory / (name + SUFFIX)
            loaded = load(path)
            pending: dict[int, int] = {}
            if loaded is None:
                position = _start_position(self._log, start, isolation_level)
            else:
                position, pending = loaded
                end = st.log_end_offset  # a tail lost since (relaxed policy, recover)
                position = min(position, end)
                pending = {o: c for o, c in pending.items() if o < end}
            log_start = self._log.log_start_offset
            position = max(position, log_start)
            pending = {o: c for o, c in pending.items() if o >= log_start}
            sub = Subscription(
                self._log,
                self,
                name,
                path,
                ack_wait_ms=ack_wait_ms,
                max_in_flight=max_in_flight,
                position=position,
                pending=pending,
                max_deliveries=max_deliveries,
                isolation_level=isolation_level,
            )
            self._live[name] = sub
            return sub

    def forget(self, sub: Subscription) -> None:
        """Drop a closed subscription from the live set."""
        with self._lock:
            if self._live.get(sub.name) is sub:
                del self._live[sub.name]

    def unsubscribe(self, name: str) -> None:
        """See ``Log.unsubscribe``."""
        validate_subscription_name(name)
        self._log._state.check_writable()
        with self._lock:
            live = self._live.pop(name, None)
            if live is not None:
                live._discard()
            path = self.directory / (name + SUFFIX)
            if not path.exists():
                raise NotFoundError(f"no subscription {name}")
            path.unlink()
            files.fsync_dir(self.directory)

    def names(self) -> list[str]:
        """See ``Log.subscriptions``."""
        try:
            entries = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        names = []
        for entry in entries:
            if entry.endswith(SUFFIX):
                name = entry[: -len(SUFFIX)]
                if NAME.fullmatch(name) and name not in (".", ".."):
                    names.append(name)
        return sorted(names)

    def close_all(self) -> None:
        """Close every live subscription (``Log.close``)."""
        with self._lock:
            live = list(self._live.values())
        for sub in live:
            try:
                sub.close()
            except OSError as e:  # its journal is intact: the next open replays it
                _logger.warning("cannot compact subscription %s at close: %s", sub.name, e)


def _start_position(log: Log, start: int, isolation_level: IsolationLevel) -> int:
    if start == OFFSET_OLDEST:
        return log.log_start_offset
    if start == OFFSET_NEWEST:
        committed = isolation_level == "read_committed"
        return log.last_stable_offset if committed else log.high_watermark
    if not log.log_start_offset <= start <= log.log_end_offset:
        raise InvalidOffsetError(
            f"start {start} outside [{log.log_start_offset}, {log.log_end_offset}]"
        )
    return start
