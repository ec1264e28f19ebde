"""``tier_sync``: one pass of tiered storage over a log (Kafka's RemoteLogManager tasks for
one partition, KIP-405): upload closed segments, apply the whole log's retention to both
tiers, then the local retention of uploaded segments.

Rules:

- **Upload** after a roll: every closed (fsynced) segment past the tier's end and below
  the last stable offset (Kafka's: an ongoing transaction's segments stay local, so
  the transaction state never needs a tiered segment):
  ``.log``, ``.index``, ``.timeindex`` and, when present, ``.txnindex`` (Kafka's
  aborted-transaction index) and ``.snapshot`` (producer snapshot), objects put
  concurrently; copy, then commit the manifest (``seglog.storage.remote.manifest``), one
  commit per ``BATCH_SEGMENTS`` segments. A failure stops the pass, counts in
  ``TierCounters.upload_failures`` and backs off exponentially (0.2 s doubling to 30 s);
  nothing local is deleted for a segment whose upload is not committed.
- **Whole-log retention** (``retention.ms`` / ``retention.bytes``, -1 = none) counts the
  remote-only segments and the local ones, oldest first, as ``trim_by_age`` /
  ``trim_by_size`` do; the log start offset moves first (persisted), then the remote
  segments below it are removed from the manifest and deleted from the store, and the
  local ones below it are removed as retention removes them.
- **Local retention** (``local.retention.ms`` / ``local.retention.bytes``; -2 = the
  whole-log value, -1 = none) deletes local segments only when their upload is committed
  and they are past it, oldest first; the log start offset does not move (the tier
  serves those offsets).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from seglog.errors import LogClosedError, StorageError
from seglog.storage.fileio import files
from seglog.storage.log import maint
from seglog.storage.remote.store import RemoteStorageError
from seglog.storage.remote.tier import BATCH_SEGMENTS
from seglog.storage.retention import policy
from seglog.storage.segment import swap

if TYPE_CHECKING:
    from seglog.storage.log.log import Log
    from seglog.storage.segment.segment import Segment

__all__ = ["TierReport", "start_tiering", "tier_sync"]

_logger = logging.getLogger(__name__)


class TierReport(NamedTuple):
    """What one ``tier_sync`` pass did."""

    uploaded: tuple[int, ...] = ()
    """Base offsets of the segments uploaded (committed)."""
    deleted_local: tuple[int, ...] = ()
    """Base offsets of the local copies deleted (local retention)."""
    deleted_remote: tuple[int, ...] = ()
    """Base offsets of the remote segments deleted (whole-log retention)."""
    lag_segments: int = 0
    """Closed local segments not uploaded yet (after the pass)."""
    lag_bytes: int = 0
    """Their bytes."""
    error: str | None = None
    """The store's error when an upload or deletion failed (retried with backoff)."""


def tier_sync(
    log: Log,
    *,
    retention_ms: int = -1,
    retention_bytes: int = -1,
    now_ms: int | None = None,
    force: bool = False,
) -> TierReport:
    """One tiered-storage pass over ``log`` (see the module docstring); a no-op on a log
    without ``remote.storage.enable`` and a tier. ``force`` ignores the backoff. Store
    failures are recorded (``TierReport.error``, ``remote_tier.counters``), not raised;
    raises ReadOnlyError, LogClosedError, OSError (local files)."""
    tier = log.remote_tier
    if tier is None or not log.config.remote_storage_enable:
        return TierReport()
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    uploaded: list[int] = []
    error: str | None = None
    with maint.maintenance_lock(log):
        closed = maint.closed_segments(log)
        if force or time.monotonic() >= tier.next_attempt:
            try:
                if not tier.orphans_checked:
                    tier.delete_orphans()
                lso = log.last_stable_offset  # Kafka copies segments below the LSO only
                pending = [
                    (s.base_offset, s.next_offset, s.size, s.max_timestamp)
                    for s in closed
                    if s.base_offset >= tier.manifest.end_offset
                    and s.size > 0
                    and s.next_offset <= lso
                ]
                for i in range(0, len(pending), BATCH_SEGMENTS):
                    done = tier.upload_many(pending[i : i + BATCH_SEGMENTS])
                    uploaded.extend(e.base_offset for e in done)
                tier.succeeded()
            except (RemoteStorageError, OSError) as e:
                tier.failed(e)
                error = str(e)
                _logger.warning("tiered storage %s: upload failed (%s); retry in %.1f s",
                                log.directory.name, e, tier.backoff_s)  # fmt: skip
        deleted_remote = _whole_retention(log, retention_ms, retention_bytes, now)
        if error is None and tier.manifest.segments:
            start = log.log_start_offset
            try:
                deleted_remote += [s.base_offset for s in tier.delete_below(start)]
            except RemoteStorageError as e:
                tier.failed(e)
                error = str(e)
        local_ms = log.config.local_retention_ms
        local_bytes = log.config.local_retention_bytes
        local_ms = retention_ms if local_ms == -2 else local_ms
        local_bytes = retention_bytes if local_bytes == -2 else local_bytes
        deleted_local = _local_retention(log, local_ms, local_bytes, now)
        closed = maint.closed_segments(log)
        end = tier.manifest.end_offset
        lag = [s for s in closed if s.base_offset >= end and s.size > 0]
    return TierReport(
        tuple(uploaded),
        tuple(deleted_local),
        tuple(sorted(set(deleted_remote))),
        len(lag),
        sum(s.size for s in lag),
        error,
    )


def _whole_retention(log: Log, retention_ms: int, retention_bytes: int, now: int) -> list[int]:
    """Move the log start past the segments (remote-only, then local closed) that
    ``retention.ms`` / ``retention.bytes`` expire; remove the local ones. Returns the
    remote base offsets now below the log start."""
    if retention_ms < 0 and retention_bytes < 0:
        return []
    tier = log.remote_tier
    assert tier is not None
    local = maint.segments(log)
    closed = maint.closed_segments(log)
    local_base = local[0].base_offset if local else log.log_end_offset
    remote = [s for s in tier.entries_below(local_base) if s.end_offset > log.log_start_offset]
    # (base offset, size, newest timestamp) oldest first; the active segment never goes
    items = [(s.base_offset, s.size, s.max_timestamp) for s in remote]
    items += [(s.base_offset, s.size, policy.segment_time_ms(s)) for s in closed]
    total = sum(s.size for s in remote) + sum(s.size for s in local)
    n = 0
    while n < len(items):
        _, size, ts = items[n]
        by_age = retention_ms >= 0 and ts < now - retention_ms
        by_size = retention_bytes >= 0 and total - size >= retention_bytes
        if not (by_age or by_size):
            break
        total -= size
        n += 1
    if n == 0:
        return []
    new_start = items[n][0] if n < len(items) else local[len(closed)].base_offset
    n_local = max(0, n - len(remote))
    if n_local:
        policy.remove_prefix(log, closed[:n_local], new_start)
    else:
        maint.set_log_start(log, new_start)
    return [s.base_offset for s in remote[:n]]


def _local_retention(log: Log, local_ms: int, local_bytes: int, now: int) -> list[int]:
    """Delete the local copies of uploaded segments past local retention, oldest first
    (never the active segment, never one whose upload is not committed)."""
    if local_ms < 0 and local_bytes < 0:
        return []
    tier = log.remote_tier
    assert tier is not None
    uploaded = {s.base_offset: s.end_offset for s in tier.manifest.segments}
    local_total = sum(s.size for s in maint.segments(log))
    remove: list[Segment] = []
    for seg in maint.closed_segments(log):
        if uploaded.get(seg.base_offset, -1) < seg.next_offset:
            break  # not (wholly) uploaded: it and every later segment stay
        by_age = local_ms >= 0 and policy.segment_time_ms(seg) < now - local_ms
        by_size = local_bytes >= 0 and local_total - seg.size >= local_bytes
        if not (by_age or by_size):
            break
        local_total -= seg.size
        remove.append(seg)
    for seg in remove:
        maint.drop_segments(log, [seg])
        swap.remove_segment_files(log.directory, seg.base_offset, counters=log.counters)
        for kind in ("txnindex", "snapshot"):
            with contextlib.suppress(OSError, StorageError):
                files.remove_if_exists(log.directory / f"{seg.base_offset:020d}.{kind}")
    if remove:
        maint.close_retired(log)
    return [s.base_offset for s in remove]


def start_tiering(
    log: Log, *, every_s: float = 1.0, retention_ms: int = -1, retention_bytes: int = -1
) -> Callable[[], None]:
    """Run :func:`tier_sync` on ``log`` every ``every_s`` seconds on a daemon thread (what
    the broker's tiering thread does for its topics, for an embedded log): uploads follow
    rolls without the caller's help. Returns a function that stops the thread and waits
    for it; the thread also ends when the log closes. Failures are logged, never raised."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every_s) and not log.closed:
            try:
                tier_sync(log, retention_ms=retention_ms, retention_bytes=retention_bytes)
            except LogClosedError:
                return
            except (StorageError, OSError):
                _logger.exception("tiered storage pass of %s failed", log.directory)

    thread = threading.Thread(target=run, name=f"seglog-tiering-{log.directory.name}", daemon=True)
    thread.start()

    def stopper() -> None:
        stop.set()
        if thread is not threading.current_thread():
            thread.join()

    return stopper
