"""The broker's tiered-storage thread (KIP-405): every ``TIER_INTERVAL_S`` seconds, one
``seglog.storage.tier_sync`` per partition of each topic with ``remote.storage.enable``:
closed segments uploaded after a roll, the topic's ``retention.ms`` / ``retention.bytes``
applied to both tiers, ``local.retention.*`` to the local copies. A store failure is
retried with exponential backoff (0.2 s doubling to 30 s, per partition) and counted
(``seglog_remote_upload_failures``); local data stays until its upload is committed.
Runs on its own daemon thread (``seglog-tiering``), never on the event loop.

A deleted topic's remote objects (segments, indexes, manifests: ``purge_partition``) are
deleted by this thread too (:meth:`TieringTask.purge`, Kafka's RemoteLogManager on topic
deletion), after the pass in progress; an unreachable store is retried with the same
backoff and logged, DeleteTopics never waits for the store. Pending purges are kept in
``<log.dirs>/remote-deletions.json`` (:data:`PENDING_FILE`, atomically replaced) and resumed
when the broker starts again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.log.periodic import PeriodicThread
from seglog.broker.log.retention import RetentionPolicy, policy_for, tiered
from seglog.errors import SeglogError
from seglog.storage import (
    DataDir,
    RemotePartition,
    RemoteStorage,
    RemoteStorageError,
    TierReport,
    atomic_write,
    purge_partition,
    tier_sync,
)

__all__ = ["PENDING_FILE", "TIER_INTERVAL_S", "TieringTask", "remote_storage", "start_tiering"]

log = logging.getLogger(__name__)

TIER_INTERVAL_S = 0.5
"""Seconds between two passes (an upload starts at most this long after a roll)."""
PENDING_FILE = "remote-deletions.json"
"""The deleted partitions whose remote objects are still to delete (in ``log.dirs``):
``[{"url", "endpoint_url", "prefix"}, ...]``."""
PURGE_BACKOFF_MIN_S = 0.2
PURGE_BACKOFF_MAX_S = 30.0
"""A failed purge of a deleted partition's objects is retried after 0.2 s, doubling to 30 s."""


@dataclass
class _Purge:
    part: RemotePartition
    retry_at: float = 0.0
    backoff_s: float = 0.0


def remote_storage(config: BrokerConfig) -> RemoteStorage | None:
    """The broker's object store from ``seglog.remote.*`` (None when unset); the cache
    lives in ``<log.dirs>/.remote-cache``."""
    if not config.remote_storage_url:
        return None
    return RemoteStorage(
        config.remote_storage_url,
        endpoint_url=config.remote_storage_endpoint_url,
        cache_bytes=config.remote_cache_bytes,
        cache_dir=str(config.data_dir / ".remote-cache"),
    )


class TieringTask:
    """The tiering thread: ``start()``, then ``stop()`` before the data directory closes."""

    def __init__(
        self,
        data_dir: DataDir,
        defaults: RetentionPolicy,
        *,
        interval_s: float = TIER_INTERVAL_S,
        pending_path: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.defaults = defaults
        self.interval_s = interval_s
        self.passes = 0
        """Completed passes (tests wait on it)."""
        self.reports: dict[tuple[str, int], TierReport] = {}
        """The last pass's report per partition (upload lag for the metrics)."""
        self.purge_failures = 0
        """Failed attempts to delete a deleted topic's objects (retried with backoff)."""
        self.purged_objects = 0
        """Objects of deleted topics deleted from the store."""
        self._pending_path = pending_path
        self._purges: list[_Purge] = [_Purge(p) for p in _load_pending(pending_path, data_dir)]
        self._purges_guard = threading.Lock()
        self._thread = PeriodicThread("seglog-tiering", interval_s, self.run_once, what="tiering")

    def start(self) -> None:
        """Start the thread: a pass every ``interval_s``."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the partition being worked on; idempotent."""
        self._thread.stop()

    def purge(self, parts: list[RemotePartition]) -> None:
        """Delete the objects of a deleted topic's partitions on the next pass (retried
        with backoff while the store fails). Thread-safe, never blocks on the store."""
        with self._purges_guard:
            self._purges.extend(_Purge(part) for part in parts)
            self._save_pending()

    @property
    def pending_purges(self) -> int:
        """Deleted partitions whose objects are not all deleted yet."""
        with self._purges_guard:
            return len(self._purges)

    def _save_pending(self) -> None:
        """Persist the pending purges (under ``_purges_guard``); an OSError is logged: the
        purges still run in this process."""
        if self._pending_path is None:
            return
        doc = [
            {"url": p.part.settings.url, "endpoint_url": p.part.settings.endpoint_url,
             "prefix": p.part.prefix}
            for p in self._purges
        ]  # fmt: skip
        try:
            atomic_write(self._pending_path, json.dumps(doc).encode())
        except OSError as exc:
            log.warning("cannot write %s: %s", self._pending_path, exc)

    def _run_purges(self) -> None:
        with self._purges_guard:
            due = [p for p in self._purges if time.monotonic() >= p.retry_at]
        for purge in due:
            if self._thread.stopping:
                return
            try:
                count = purge_partition(purge.part)
            except RemoteStorageError as exc:
                self.purge_failures += 1
                purge.backoff_s = min(
                    PURGE_BACKOFF_MAX_S, max(PURGE_BACKOFF_MIN_S, purge.backoff_s * 2)
                )
                purge.retry_at = time.monotonic() + purge.backoff_s
                log.warning(
                    "deleting the remote objects of deleted partition %s failed (retry in "
                    "%.1f s): %s", purge.part.prefix, purge.backoff_s, exc,
                )  # fmt: skip
                continue
            with self._purges_guard:
                self._purges.remove(purge)
                self._save_pending()
            self.purged_objects += count
            log.info("deleted partition %s: %d remote object(s) deleted from %s",
                     purge.part.prefix, count, purge.part.settings.url)  # fmt: skip

    def run_once(self) -> None:
        """One pass: the deleted topics' objects purged, then the tiered topics'
        partitions synced."""
        if self._purges:
            self._run_purges()
        for name, info in self.data_dir.topics().items():
            if info.configs.get("remote.storage.enable", "false").strip().lower() != "true":
                continue
            policy = policy_for(info.configs, self.defaults)
            retention_ms = policy.retention_ms if policy.delete else -1
            retention_bytes = policy.retention_bytes if policy.delete else -1
            for partition in range(info.partitions):
                if self._thread.stopping:
                    return
                try:
                    plog = self.data_dir.log(name, partition)
                    if not tiered(plog):
                        continue
                    report = tier_sync(
                        plog, retention_ms=retention_ms, retention_bytes=retention_bytes
                    )
                except (SeglogError, OSError) as exc:  # deleted or closed meanwhile
                    log.debug("tiering skipped %s-%d: %s", name, partition, exc)
                    continue
                self.reports[(name, partition)] = report
                if report.uploaded or report.deleted_local or report.deleted_remote:
                    log.info(
                        "tiering %s-%d: %d uploaded, %d local and %d remote segment(s) "
                        "deleted; log start %d, local log start %d",
                        name, partition, len(report.uploaded), len(report.deleted_local),
                        len(report.deleted_remote), plog.log_start_offset,
                        plog.local_log_start_offset,
                    )  # fmt: skip
        self.passes += 1


def _load_pending(path: Path | None, data_dir: DataDir) -> list[RemotePartition]:
    """The purges a previous run left pending (:data:`PENDING_FILE`); [] when none or
    unreadable (logged)."""
    if path is None or not path.exists():
        return []
    try:
        doc = json.loads(path.read_bytes())
        parts = []
        for item in doc:
            settings = data_dir.remote
            if settings is None or settings.url != item["url"]:
                settings = RemoteStorage(item["url"], item.get("endpoint_url"))
            parts.append(RemotePartition(settings, str(item["prefix"])))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("cannot read %s (pending deletions of remote objects lost): %s", path, exc)
        return []
    if parts:
        log.info("%d deleted partition(s) still to purge from the store", len(parts))
    return parts


def start_tiering(config: BrokerConfig, data_dir: DataDir) -> TieringTask | None:
    """The tiering thread, started, when ``seglog.remote.storage.url`` is set."""
    if data_dir.remote is None:
        return None
    parts = {p.strip() for p in config.log_cleanup_policy.split(",")}
    defaults = RetentionPolicy(
        delete="delete" in parts,
        compact="compact" in parts,
        retention_ms=config.log_retention_ms,
        retention_bytes=config.log_retention_bytes,
        delete_retention_ms=config.log_cleaner_delete_retention_ms,
        min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
    )
    task = TieringTask(data_dir, defaults, pending_path=config.data_dir / PENDING_FILE)
    task.start()
    return task
