"""Durable subscriptions (NATS Streaming's durable subscribers) over one partition log.

``Log.subscribe(name, ack_wait_ms=..., max_in_flight=..., start=...)`` returns a
:class:`Subscription`: ``fetch`` hands out :class:`Delivery` objects (first those whose
``ack_wait`` expired without an ack, redelivered with ``redelivery_count + 1``, then new
messages from the subscription's position), at most ``max_in_flight`` unacknowledged at
any time; ``ack`` settles them. At-least-once: a message is delivered again until its ack
returned, across restarts and kill -9. ``fetch_offsets_now`` is ``fetch_now`` (``fetch``
without waiting) giving ``(offset, redelivery_count)`` pairs instead, no message decoded.

State file: ``<partition>/subscriptions/<name>.sub``, an append-only journal of text lines
``<crc32 as 8 hex digits> <json>\\n``. The first line is a snapshot (``{"v": 1, "name",
"position", "pending": [[offset, redelivery count], ...]}``); the next ones are changes:
``{"d": [offsets], "p": position}`` (new deliveries, count 0, position moved),
``{"r": [offsets]}`` (redeliveries, count + 1), ``{"a": [offsets]}`` (acks). An ack
appends one short line, so it costs O(1) amortised: once the journal outgrows four times
its snapshot (and 64 KiB) it is compacted, i.e. replaced by one snapshot line through the
atomic writer (``fileio.files.write_small_file``: temp file, fsync, rename, fsync dir);
the compacted size is O(unacked), paid for by the appends that preceded it. Opening a
subscription and ``close`` compact too. Loading stops at the first line that is
incomplete or fails its CRC (a torn append: never acknowledged to the caller) and the
compaction at open drops it.

Durability follows the log's policy: under the default (fsync before acknowledge) every
``fetch`` that delivers and every ``ack`` fsyncs the journal before returning; under
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
import json
import logging
import operator
import os
import pathlib
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seglog.errors import (
    InvalidOffsetError,
    LogClosedError,
    LogCorruptedError,
    NotFoundError,
    StorageError,
)
from seglog.storage.fileio import files
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

SUBSCRIPTIONS_DIR = "subscriptions"
"""Subdirectory of the partition directory holding one ``<name>.sub`` per subscription."""
SUFFIX = ".sub"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
_COMPACT_MIN_BYTES = 64 << 10
_MAX_GAP = 16
"""Redeliveries read runs of pending offsets at most this far apart with one
``consume_columns``."""

_logger = logging.getLogger(__name__)

clock: Callable[[], float] = time.monotonic
"""Monotonic seconds for ack-wait deadlines (a module attribute so tests can fake it)."""


def validate_subscription_name(name: str) -> None:
    """ValueError unless ``name`` matches ``[A-Za-z0-9._-]{1,200}`` (a file name inside
    the subscriptions directory, never a path outside it)."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None or name in (".", ".."):
        raise ValueError(f"invalid subscription name {name!r}: use [A-Za-z0-9._-]{{1,200}}")


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


def _line(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """The valid records of a journal and the byte length of that valid prefix."""
    records: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            break
        line = data[pos:end]
        if len(line) < 10 or line[8:9] != b" ":
            break
        body = line[9:]
        try:
            if int(line[:8], 16) != zlib.crc32(body):
                break
            record = json.loads(body)
        except ValueError:
            break
        if not isinstance(record, dict):
            break
        records.append(record)
        pos = end + 1
    return records, pos


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
        self._pending: dict[int, tuple[int, float]] = {}
        """offset -> (redelivery count so far, deadline in ``clock()`` seconds)."""
        self._heap: list[tuple[float, int]] = []
        """(deadline, offset), lazily cleaned: stale once the offset's deadline differs."""
        for offset in sorted(pending):
            self._pending[offset] = (pending[offset], float("-inf"))  # due at once
            self._heap.append((float("-inf"), offset))
        self._waiters: set[Future[None]] = set()
        self._seen_log_start = log.log_start_offset
        self._durable = log.config.fsync_before_ack
        self._fd = -1
        self._journal_bytes = 0
        self._snapshot_bytes = 0
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
            return {o: c for o, (c, _) in sorted(self._pending.items())}

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
        taken, messages = self._take(max_count, decode=True)
        return [Delivery(messages[offset], count) for offset, count in taken]

    def fetch_offsets_now(self, max_count: int) -> list[tuple[int, int]]:
        """As :meth:`fetch_now` (the same deliveries in the same order, the same state
        changes and journal lines; the same errors but a message's decoding) but only
        ``[(offset, redelivery_count), ...]``, no message decoded: new offsets come from
        the vectorised decoder's offsets column (``Log.consume_columns``), and an expired
        offset is only looked up (still stored, else archived as by ``fetch_now``). For a
        caller that reads the stored record batches itself (the broker's share
        partitions)."""
        return self._take(max_count, decode=False)[0]

    def _take(
        self, max_count: int, *, decode: bool
    ) -> tuple[list[tuple[int, int]], dict[int, Message]]:
        """The one delivery step of :meth:`fetch_now` and :meth:`fetch_offsets_now`:
        ``(offset, redelivery count)`` per delivery (redeliveries, then new offsets), and
        when ``decode`` the message of each (else ``{}``)."""
        if max_count < 1:
            raise ValueError("max_count must be >= 1")
        with self._lock:
            self._check_open()
            self._drop_below_log_start()
            now = clock()
            records: list[dict[str, Any]] = []
            out, messages = self._redeliver(now, max_count, records, decode=decode)
            room = min(max_count - len(out), self._max_in_flight - len(self._pending))
            if room > 0:
                old_position = self._position
                cols = self._log.consume_columns(
                    self._position, room, isolation_level=self._isolation
                )
                nxt = cols.next_offset
                offsets: list[int] = cols.offsets.tolist()
                if decode:
                    messages.update(zip(offsets, cols.messages(), strict=True))
                due = now + self._ack_wait_ms / 1000.0
                pending, heap = self._pending, self._heap
                for offset in offsets:
                    pending[offset] = (0, due)
                    heapq.heappush(heap, (due, offset))
                    out.append((offset, 0))
                self._position = nxt
                if offsets or nxt != old_position:
                    records.append({"d": offsets, "p": nxt})
            if records:
                self._append(records, sync=bool(out))
            return out, messages

    def _redeliver(
        self, now: float, max_count: int, records: list[dict[str, Any]], *, decode: bool
    ) -> tuple[list[tuple[int, int]], dict[int, Message]]:
        """Pop up to ``max_count`` expired offsets off the heap and look them up (read
        their messages when ``decode``): ``(offset, redelivery count)`` per redelivery and
        the messages (``{}`` unless ``decode``); their journal records go to ``records``.
        Offsets no longer stored, or already delivered ``max_deliveries`` times, leave
        the pending set (journaled as acks)."""
        due: list[int] = []
        taken: set[int] = set()
        heap = self._heap
        while heap and len(due) < max_count and heap[0][0] <= now:
            deadline, offset = heapq.heappop(heap)
            entry = self._pending.get(offset)
            # a stale entry can equal the live one (released and redelivered at the same
            # ``clock()`` as its previous delivery): one delivery per offset per fetch
            if entry is not None and entry[1] == deadline and offset not in taken:
                due.append(offset)
                taken.add(offset)
        if not due:
            return [], {}
        try:
            stored, messages = self._read_offsets(sorted(due), decode=decode)
        except BaseException:  # CorruptRecordError, LogClosedError...: still due later
            for offset in due:
                heapq.heappush(heap, (self._pending[offset][1], offset))
            raise
        new_deadline = now + self._ack_wait_ms / 1000.0
        out: list[tuple[int, int]] = []
        gone: list[int] = []
        limit = self._max_deliveries
        for offset in due:
            if offset not in stored or (
                limit is not None and self._pending[offset][0] + 1 >= limit
            ):
                gone.append(offset)  # no longer stored, or delivered max_deliveries times
                del self._pending[offset]
                continue
            count = self._pending[offset][0] + 1
            self._pending[offset] = (count, new_deadline)
            heapq.heappush(heap, (new_deadline, offset))
            out.append((offset, count))
        if gone:
            records.append({"a": gone})
        if out:
            records.append({"r": [offset for offset, _ in out]})
        return out, messages

    def _read_offsets(
        self, wanted: list[int], *, decode: bool
    ) -> tuple[set[int], dict[int, Message]]:
        """Which of the sorted offsets ``wanted`` are stored, and (when ``decode``) their
        messages (else ``{}``)."""
        stored: set[int] = set()
        found: dict[int, Message] = {}
        i = 0
        while i < len(wanted):
            first = wanted[i]
            j = i
            while j + 1 < len(wanted) and wanted[j + 1] - wanted[j] <= _MAX_GAP:
                j += 1
            want = set(wanted[i : j + 1])
            try:
                cols = self._log.consume_columns(first, wanted[j] - first + 1)
            except InvalidOffsetError:  # below the log start since (retention)
                nxt = first + 1
            else:
                nxt = cols.next_offset
                hits = want.intersection(cols.offsets.tolist())
                stored |= hits
                if decode and hits:
                    found.update((m.offset, m) for m in cols.messages() if m.offset in hits)
            nxt = max(nxt, first + 1)
            while i < len(wanted) and wanted[i] < nxt:
                i += 1
        return stored, found

    def _drop_below_log_start(self) -> None:
        start = self._log.log_start_offset
        if start == self._seen_log_start:  # the scan below only when retention moved it
            return
        self._seen_log_start = start
        self._position = max(self._position, start)
        for offset in [o for o in self._pending if o < start]:
            del self._pending[offset]

    def next_expiry_s(self) -> float | None:
        """Seconds until the earliest unacknowledged delivery expires (0 if one already
        has), None when nothing is in flight."""
        with self._lock:
            heap = self._heap
            while heap:
                deadline, offset = heap[0]
                entry = self._pending.get(offset)
                if entry is not None and entry[1] == deadline:
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
            if len(self._pending) < self._max_in_flight:
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

    def ack(self, offsets: int | Iterable[int]) -> int:
        """Acknowledge one offset or several: they are never delivered again once this
        returns (durable under the default policy). Offsets below ``position`` that are
        not in flight (already acknowledged, or dropped by retention) are ignored; an
        offset at or above ``position`` was never delivered: ValueError, and nothing of
        this call is acknowledged. Returns how many were in flight (now acknowledged).
        LogClosedError when closed; StorageError when the state cannot be written
        (nothing of this call acknowledged then)."""
        with self._lock:
            batch = self._delivered(offsets)
            popped = {o: self._pending.pop(o) for o in batch if o in self._pending}
            acked = list(popped)
            if acked:
                try:
                    self._append([{"a": acked}], sync=True)
                except BaseException:
                    self._pending.update(popped)  # not acknowledged: delivered again
                    raise
        if acked:
            self._wake_all()
        return len(acked)

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
            released = 0
            now = float("-inf")
            for o in batch:
                entry = self._pending.get(o)
                if entry is None:
                    continue
                released += 1
                if entry[1] != now:  # not already due (released, or loaded at open)
                    self._pending[o] = (entry[0], now)
                    heapq.heappush(self._heap, (now, o))
        if released:
            self._wake_all()
        return released

    # -- the journal -----------------------------------------------------------------------

    def _append(self, records: list[dict[str, Any]], *, sync: bool) -> None:
        """Append ``records`` to the journal (one write); fsync it when ``sync`` under the
        default policy; compact when the journal outgrew its snapshot. On a write error
        the journal is cut back to its last whole line (a torn line would hide every
        later one from the next load) and StorageError raised; an fsync error closes the
        subscription (the kernel may have dropped the pages: reopen it)."""
        data = b"".join(_line(r) for r in records)
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
        if self._journal_bytes > 4 * self._snapshot_bytes + _COMPACT_MIN_BYTES:
            try:
                self._compact()  # fsyncs (atomic writer)
                return
            except OSError as e:  # the journal is intact: keep appending to it
                _logger.warning("cannot compact subscription %s: %s", self._path, e)
        if sync and self._durable:
            try:
                os.fdatasync(self._fd)
            except OSError as e:
                self._fail()
                raise StorageError(f"subscription {self._name}: fsync failed: {e}") from e

    def _fail(self) -> None:
        """Stop using the journal after an error that leaves it uncertain."""
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._wake_all(LogClosedError(f"subscription {self._name} failed: reopen it"))

    def _compact(self) -> None:
        """Replace the journal with one snapshot line (atomic writer), reopen it for appends."""
        snapshot = {
            "v": 1,
            "name": self._name,
            "position": self._position,
            "pending": [[o, c] for o, (c, _) in sorted(self._pending.items())],
        }
        data = _line(snapshot)
        files.write_small_file(self._path, data)
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
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
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1
        self._owner.forget(self)
        self._wake_all(LogClosedError(f"subscription {self._name} closed"))

    def _discard(self) -> None:
        """Close without writing (``unsubscribe``: the file is about to go)."""
        with self._lock:
            self._closed = True
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
            f"in_flight={len(self._pending)})"
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


def _load(path: pathlib.Path) -> tuple[int, dict[int, int]] | None:
    """(position, pending offset -> redelivery count) replayed from a journal; None when
    the file is missing. LogCorruptedError when its first line (a snapshot, written
    whole by the atomic writer) is unreadable: never a silent restart from scratch."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    records, _ = _parse(data)
    if not records or records[0].get("v") != 1 or "position" not in records[0]:
        raise LogCorruptedError(
            f"subscription state {path} is damaged (no valid snapshot line): "
            "remove it with Log.unsubscribe to start over"
        )
    snap = records[0]
    position = int(snap["position"])
    pending = {int(o): int(c) for o, c in snap["pending"]}
    for rec in records[1:]:
        if "d" in rec:
            for o in rec["d"]:
                pending[int(o)] = 0
            position = int(rec["p"])
        elif "r" in rec:
            for o in rec["r"]:
                if o in pending:
                    pending[o] += 1
        elif "a" in rec:
            for o in rec["a"]:
                pending.pop(o, None)
    return position, pending


def floor(log: Log, name: str) -> int | None:
    """The lowest offset subscription ``name`` of ``log`` still needs (its lowest
    unacknowledged offset, else its position), at least the log start offset; None when
    it has no state file (never subscribed). Read-only: reads the journal, opens or
    changes nothing (a live subscription writes every change to its journal before
    returning, and a torn last line only reads as an older, lower state). Raises
    ValueError (bad name), LogCorruptedError (damaged state file)."""
    validate_subscription_name(name)
    loaded = _load(log.directory / SUBSCRIPTIONS_DIR / (name + SUFFIX))
    if loaded is None:
        return None
    position, pending = loaded
    start = log.log_start_offset  # pending offsets below it are gone (the subscription drops them)
    return max(start, min([position, *(o for o in pending if o >= start)]))


def backup_states(directory: pathlib.Path, end: int) -> list[tuple[str, bytes]]:
    """The subscription state files of the partition ``directory`` as a backup of its
    prefix ending at offset ``end`` holds them: ``(file name, bytes)`` sorted by name,
    each journal replayed into one snapshot line (what ``close`` writes) whose position
    is at most ``end`` and whose unacknowledged offsets are below ``end`` (deliveries past
    the copied prefix are not in the copy, so neither is their state). A file that cannot
    be replayed (damaged snapshot line) is copied as it is: the copy's ``subscribe``
    raises LogCorruptedError as the source's does. A file removed meanwhile
    (``unsubscribe``) is left out. OSError on other read errors."""
    try:
        entries = sorted(os.listdir(directory / SUBSCRIPTIONS_DIR))
    except FileNotFoundError:
        return []
    out: list[tuple[str, bytes]] = []
    for entry in entries:
        name = entry[: -len(SUFFIX)]
        if not entry.endswith(SUFFIX) or not _NAME.fullmatch(name) or name in (".", ".."):
            continue
        path = directory / SUBSCRIPTIONS_DIR / entry
        try:
            loaded = _load(path)
        except LogCorruptedError:
            with contextlib.suppress(FileNotFoundError):
                out.append((entry, path.read_bytes()))
            continue
        if loaded is None:
            continue
        position, pending = loaded
        snapshot = {
            "v": 1,
            "name": name,
            "position": min(position, end),
            "pending": [[o, c] for o, c in sorted(pending.items()) if o < end],
        }
        out.append((entry, _line(snapshot)))
    return out


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
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level {isolation_level!r}")
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
            loaded = _load(path)
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
                if _NAME.fullmatch(name) and name not in (".", ".."):
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
