"""Compaction (Kafka's log cleaner for ``cleanup.policy=compact``; klevdb's
``CompactUpdates`` / ``CompactDeletes``): keep the last record of every key.

Policy (which records go; the mechanism is ``retention/rewrite.py``):

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
- Offsets never change; the log start and end offsets stay (see ``retention/rewrite.py``).
- Transactions (Kafka's cleaner, ``compact_txn.py``): only segments below the last
  stable offset are cleaned and the key map stops there; records of aborted transactions
  are removed and never supersede a key; a marker goes once no batch of its transaction
  is left and it is ``delete_retention_ms`` old.

Each segment is swapped in atomically (``.cleaned`` → ``.swap``); a crash between two
segments leaves some cleaned: every such state keeps the last record of every key.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from seglog.storage.config import TIERED_COMPACT_MESSAGE
from seglog.storage.log import maint
from seglog.storage.log.keys import forget_removed
from seglog.storage.record.batch import parse_header
from seglog.storage.record.columns import decode_columns
from seglog.storage.retention.compact_txn import transaction_drops
from seglog.storage.retention.rewrite import Removed, iter_chunks, rewrite_segment

if TYPE_CHECKING:
    from seglog.storage.index.txn_index import AbortedTxn
    from seglog.storage.log.log import Log
    from seglog.storage.segment.segment import Segment

__all__ = ["DEFAULT_DELETE_RETENTION_MS", "compact", "compact_deletes", "compact_updates"]

DEFAULT_DELETE_RETENTION_MS = 24 * 3600 * 1000
"""Kafka's delete.retention.ms default: tombstones stay one day."""


class _Seg(NamedTuple):
    """The records of one segment, decoded once: offsets, key ids (-1 = no key; ids
    index the key map), tombstone flags, timestamps (ms)."""

    offsets: npt.NDArray[np.int64]
    key_ids: npt.NDArray[np.int64]
    tombstones: npt.NDArray[np.bool_]
    timestamps: npt.NDArray[np.int64]


def _decode(seg: Segment, end: int, ids: dict[bytes, int], aborted: list[AbortedTxn]) -> _Seg:
    """Decode ``seg``'s records below ``end`` once with the vectorised decoder (a chunk
    of batches at a time; control batches and the records of the ``aborted``
    transactions skipped), interning keys into ``ids``."""
    parts: list[
        tuple[npt.NDArray[np.int64], list[int], npt.NDArray[np.bool_], npt.NDArray[np.int64]]
    ] = []
    for chunk in iter_chunks(seg):
        first = parse_header(chunk).base_offset
        pairs = [(a.producer_id, a.first_offset) for a in aborted if a.last_offset >= first]
        cols = decode_columns(chunk, 0, end, aborted=pairs)
        buf = cols.buffer
        assert isinstance(buf, bytes)  # decoded from bytes, not borrowed
        kids = [
            -1 if n < 0 else ids.setdefault(buf[p : p + n], len(ids))
            for p, n in zip(cols.key_positions.tolist(), cols.key_lengths.tolist(), strict=True)
        ]
        parts.append((cols.offsets, kids, cols.value_lengths < 0, cols.timestamps))
        if cols.next_offset >= end:
            break
    if not parts:
        e = np.empty(0, dtype=np.int64)
        return _Seg(e, e, np.empty(0, dtype=np.bool_), e)
    return _Seg(
        np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False),
        np.fromiter((k for p in parts for k in p[1]), dtype=np.int64),
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]).astype(np.int64, copy=False),
    )


def compact(
    log: Log,
    *,
    updates: bool = True,
    deletes: bool = True,
    before_ms: int | None = None,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    min_compaction_lag_ms: int = 0,
    now_ms: int | None = None,
) -> Removed:
    """Compact ``log`` as the module docstring says; returns the removed offsets and the
    bytes freed. ``updates``/``deletes`` select the two halves; ``before_ms`` bounds
    both to records older than it (klevdb's ``before``); ``now_ms`` defaults to the wall
    clock. Raises ReadOnlyError,
    LogClosedError, OSError; ValueError for negative durations and for a tiered log
    (``remote.storage.enable`` or a remote tier: Kafka never compacts a tiered topic,
    whose uploaded segments the remote copies must keep matching)."""
    if delete_retention_ms < 0 or min_compaction_lag_ms < 0:
        raise ValueError("delete_retention_ms and min_compaction_lag_ms must be >= 0")
    if log.config.remote_storage_enable or log.remote_tier is not None:
        raise ValueError(
            f"{TIERED_COMPACT_MESSAGE}: {log.directory} is tiered (remote.storage.enable)"
        )
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    tombstone_before = now - delete_retention_ms
    if before_ms is not None:
        tombstone_before = min(tombstone_before, before_ms)
    update_before = before_ms if before_ms is not None else 1 << 62
    with maint.maintenance_lock(log):
        log.sync()
        # Kafka cleans below the first unstable offset only: an ongoing transaction's
        # records may still be aborted, so neither they nor later ones supersede a key
        end = log.last_stable_offset
        closed = maint.closed_segments(log)
        cleanable = {
            id(s)
            for s in closed
            if s.max_timestamp <= now - min_compaction_lag_ms and s.size and s.next_offset <= end
        }
        if not cleanable:
            maint.close_retired(log)
            return Removed([], 0)
        # one decode per segment: the key map (last offset per key id) and the records
        # of the segments up to the last cleanable one, kept as numpy columns
        ids: dict[bytes, int] = {}
        upto = max(i for i, s in enumerate(closed) if id(s) in cleanable)
        decoded: list[_Seg] = []
        last_parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
        aborted = maint.aborted_entries(log, end)
        for i, seg in enumerate(maint.segments(log)):
            if seg.base_offset >= end:
                break
            recs = _decode(seg, end, ids, aborted)
            if i <= upto:
                decoded.append(recs)
            keyed = recs.key_ids >= 0
            last_parts.append((recs.key_ids[keyed], recs.offsets[keyed]))
        n_ids = max(1, len(ids))  # keyless records look up id 0 (masked out)
        last = np.full(n_ids, -1, dtype=np.int64)
        for kids, offs in last_parts:  # offsets ascend: a later assignment wins
            np.maximum.at(last, kids, offs)
        drops: list[npt.NDArray[np.bool_]] = []
        kept_superseded = np.zeros(n_ids, dtype=np.bool_)
        tomb_candidates: list[npt.NDArray[np.bool_]] = []
        for seg, recs in zip(closed[: upto + 1], decoded, strict=True):
            keyed = recs.key_ids >= 0
            superseded = keyed & (last[np.maximum(recs.key_ids, 0)] != recs.offsets)
            if id(seg) in cleanable:
                drop = (
                    superseded & (recs.timestamps < update_before)
                    if updates
                    else (np.zeros(len(recs.offsets), dtype=np.bool_))
                )
                cand = keyed & ~superseded & recs.tombstones & (recs.timestamps < tombstone_before)
                cand &= deletes
            else:
                drop = np.zeros(len(recs.offsets), dtype=np.bool_)
                cand = drop
            kept_superseded[recs.key_ids[superseded & ~drop]] = True
            drops.append(drop)
            tomb_candidates.append(cand)
        # a key's last record follows all its other records: its tombstone goes only when
        # none of them is kept (else the key would come back)
        txn = transaction_drops(closed[: upto + 1], cleanable, aborted, tombstone_before)
        plans: list[tuple[Segment, list[int], frozenset[int]]] = []
        for seg, recs, drop, cand in zip(
            closed[: upto + 1], decoded, drops, tomb_candidates, strict=True
        ):
            gone = drop | (cand & ~kept_superseded[np.maximum(recs.key_ids, 0)])
            data, seg_markers = txn.get(id(seg), ([], []))
            if gone.any() or data or seg_markers:
                offsets = sorted({*recs.offsets[gone].tolist(), *data})
                plans.append((seg, offsets, frozenset(seg_markers)))
        removed: list[int] = []
        freed = 0
        for seg, offsets, markers in plans:
            done, size = rewrite_segment(log, seg, offsets, markers=markers)
            removed.extend(done)
            freed += size
        # a key's removed last record is a tombstone (no earlier record kept: forget the
        # key) or an aborted record (its latest surviving record becomes its last: rescan)
        forget_removed(log, removed, rescan=any(data for data, _ in txn.values()))
        maint.close_retired(log)
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
