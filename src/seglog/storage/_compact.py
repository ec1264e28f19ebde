"""Compaction (Kafka's log cleaner for ``cleanup.policy=compact``; klevdb's
``CompactUpdates`` / ``CompactDeletes``): keep the last record of every key.

Policy (which records go; the mechanism is ``_rewrite.py``):

- The key map (last offset of every key) is built over the whole log up to its durable
  end (``Log.sync()`` first), the active segment included.
- Only *cleanable* segments are rewritten: closed (never the active segment), fsynced,
  and with a largest timestamp at least ``min_compaction_lag_ms`` old (Kafka's
  min.compaction.lag.ms, per segment).
- Updates: a keyed record with a later record of the same key is removed (only if its
  timestamp is before ``before_ms`` when given). Records without a key stay.
- Deletes: a tombstone (value None) that is the last record of its key is removed once
  its timestamp is older than ``now - delete_retention_ms`` (Kafka's
  delete.retention.ms, counted from the tombstone's own timestamp here) and no earlier
  record of that key is kept, so a key never comes back.
- Offsets never change; the log start and end offsets stay (see ``_rewrite.py``).

Each segment is swapped in atomically (``.cleaned`` → ``.swap``); a crash between two
segments leaves some cleaned: every such state keeps the last record of every key.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from seglog.storage import _maint, _swap
from seglog.storage._columns import decode_columns
from seglog.storage._rewrite import Removed, iter_chunks, rewrite_segment

if TYPE_CHECKING:
    from seglog.storage._log import Log
    from seglog.storage._segment import Segment

__all__ = ["DEFAULT_DELETE_RETENTION_MS", "compact", "compact_deletes", "compact_updates"]

DEFAULT_DELETE_RETENTION_MS = 24 * 3600 * 1000
"""Kafka's delete.retention.ms default: tombstones stay one day."""

_Rec = tuple[int, bytes | None, bool, int]  # offset, key, is tombstone, timestamp


def _records(seg: Segment, end: int) -> Iterable[_Rec]:
    """(offset, key, is tombstone, timestamp) of the records below ``end``, decoded a
    chunk of batches at a time with the vectorised decoder (control batches skipped)."""
    for chunk in iter_chunks(seg):
        cols = decode_columns(chunk, 0, end)
        buf = cols.buffer
        kp, kl = cols.key_positions.tolist(), cols.key_lengths.tolist()
        tomb = (cols.value_lengths < 0).tolist()
        for off, p, n, t, ts in zip(
            cols.offsets.tolist(), kp, kl, tomb, cols.timestamps.tolist(), strict=True
        ):
            yield off, (buf[p : p + n] if n >= 0 else None), t, ts
        if cols.next_offset >= end:
            return


def compact(
    log: Log,
    *,
    updates: bool = True,
    deletes: bool = True,
    before_ms: int | None = None,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    min_compaction_lag_ms: int = 0,
    now_ms: int | None = None,
    on_step: _swap.Step | None = None,
) -> Removed:
    """Compact ``log`` as the module docstring says; returns the removed offsets and the
    bytes freed. ``updates``/``deletes`` select the two halves; ``before_ms`` bounds
    both to records older than it (klevdb's ``before``); ``now_ms`` defaults to the wall
    clock. ``on_step``: test hook (``_swap.Step``). Raises ReadOnlyError,
    LogClosedError, OSError; ValueError for negative durations."""
    if delete_retention_ms < 0 or min_compaction_lag_ms < 0:
        raise ValueError("delete_retention_ms and min_compaction_lag_ms must be >= 0")
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    tombstone_before = now - delete_retention_ms
    if before_ms is not None:
        tombstone_before = min(tombstone_before, before_ms)
    update_before = before_ms if before_ms is not None else 1 << 62
    with _maint.maintenance_lock(log):
        end = log.sync()
        closed = _maint.closed_segments(log)
        cleanable = {
            id(s) for s in closed if s.max_timestamp <= now - min_compaction_lag_ms and s.size
        }
        if not cleanable:
            _maint.close_retired(log)
            return Removed([], 0)
        last: dict[bytes, int] = {}
        for seg in list(log._segments):
            for offset, key, _, _ in _records(seg, end):
                if key is not None:
                    last[key] = offset
        plans: list[tuple[Segment, list[int]]] = []
        kept_earlier: set[bytes] = set()
        upto = max(i for i, s in enumerate(closed) if id(s) in cleanable)
        for seg in closed[: upto + 1]:
            drop: list[int] = []
            clean = id(seg) in cleanable
            for offset, key, tombstone, ts in _records(seg, end):
                if key is None:
                    continue
                superseded = last[key] != offset
                if (clean and updates and superseded and ts < update_before) or (
                    clean
                    and deletes
                    and tombstone
                    and not superseded
                    and ts < tombstone_before
                    and key not in kept_earlier
                ):
                    drop.append(offset)
                elif superseded:
                    kept_earlier.add(key)
            if drop:
                plans.append((seg, drop))
        removed: list[int] = []
        freed = 0
        for seg, drop in plans:
            gone, size = rewrite_segment(log, seg, drop, on_step)
            removed.extend(gone)
            freed += size
        _maint.close_retired(log)
        return Removed(removed, freed)


def compact_updates(log: Log, before_ms: int | None = None) -> Removed:
    """Remove every keyed record that a later record of the same key supersedes (with a
    timestamp before ``before_ms`` when given), closed segments only (klevdb's
    CompactUpdates). Tombstones stay. Errors as ``compact``."""
    return compact(log, deletes=False, before_ms=before_ms)


def compact_deletes(log: Log, before_ms: int | None = None) -> Removed:
    """Remove tombstones (value None) that are the last record of their key, have no
    earlier record of that key left, and a timestamp before ``before_ms`` (default: now)
    (klevdb's CompactDeletes). Errors as ``compact``."""
    now = time.time_ns() // 1_000_000
    return compact(
        log,
        updates=False,
        before_ms=now if before_ms is None else before_ms,
        delete_retention_ms=0,
        now_ms=now if before_ms is None else max(now, before_ms),
    )
