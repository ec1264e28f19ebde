"""Background retention and log cleaning: every ``log.retention.check.interval.ms`` apply
each topic's ``cleanup.policy`` to each of its partitions (Kafka's LogManager retention
task and LogCleaner, policy only: the mechanism is ``seglog.storage``'s trims and
compaction).

Per topic, its CreateTopics configs override the broker defaults (Kafka's names):

- ``cleanup.policy``: ``delete`` (default), ``compact``, or ``compact,delete``;
- ``delete``: ``retention.ms`` (default 7 days; -1 = keep forever) removes closed
  segments whose newest record is older; ``retention.bytes`` (default -1 = no limit)
  removes the oldest closed segments while the partition stays above it;
- ``compact``: keep the last record per key, tombstones dropped after
  ``delete.retention.ms`` (default 1 day), segments younger than
  ``min.compaction.lag.ms`` (default 0) untouched;
- ``seglog.retention.consumed=true`` (any ``cleanup.policy``): also remove the closed
  segments wholly below the lowest committed offset (``__consumer_offsets``) of the groups
  in ``seglog.retention.consumed.groups`` for that partition (InfluxDB's topic max index;
  the storage's ``trim_segments_below``): the log start offset moves to a segment
  boundary, as after DeleteRecords for fetchers and ListOffsets. A partition one of
  the groups has no committed offset for is not trimmed this way, nor is any partition
  when the list is empty (AlterConfigs and CreateTopics refuse that);
- ``seglog.parquet.mirror=true``: after retention and cleaning, write a Parquet mirror of
  every closed segment that lacks one and delete mirrors of removed or rewritten segments
  (``seglog.columnar``; read by ``seglog.spark.read_topic``).

Each pass also closes the ``.log`` handles of segments nobody read for ``idle_handle_s``
(``Log.gc``, default :data:`IDLE_HANDLE_S`; never the active segment; a read reopens
them), so the broker holds a handle per recently read segment, not one per segment.

Never the active segment. Removed segments go through ``--log-archive-command`` when
set. The work runs on one daemon thread (``seglog-retention``), never on the event
loop; it coordinates with appends through each log's locks, and with the loop through
the thread-safe ``DataDir``. A bad topic config value is logged and the broker default
used instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from seglog.broker.config.broker_config import BrokerConfig
from seglog.broker.config.settings import CONSUMED, CONSUMED_GROUPS, consumed_groups
from seglog.broker.log.periodic import PeriodicThread
from seglog.errors import SeglogError
from seglog.storage import DataDir, Log, compact, trim_by_age, trim_by_size, trim_segments_below

__all__ = [
    "IDLE_HANDLE_S",
    "CommittedFloor",
    "RetentionPolicy",
    "RetentionTask",
    "apply_policy",
    "consumed_policy",
    "policy_for",
    "start_retention",
    "tiered",
]

log = logging.getLogger(__name__)

DAY_MS = 24 * 3600 * 1000
IDLE_HANDLE_S = 600.0
"""Segment handles unused for this long are closed by the retention pass (seconds)."""

CommittedFloor = Callable[[Sequence[str], str, int], int | None]
"""``(groups, topic, partition) -> lowest committed offset``, None when one of the groups
has none (``CommittedOffsets.lowest``)."""


class RetentionPolicy(NamedTuple):
    """A topic's retention and cleaning settings (Kafka topic config names)."""

    delete: bool
    """``cleanup.policy`` contains ``delete``."""
    compact: bool
    """``cleanup.policy`` contains ``compact``."""
    retention_ms: int
    """``retention.ms``; -1 = no time limit."""
    retention_bytes: int
    """``retention.bytes`` per partition; -1 = no size limit."""
    delete_retention_ms: int
    """``delete.retention.ms``: how long tombstones stay."""
    min_compaction_lag_ms: int
    """``min.compaction.lag.ms``: segments younger than this are not compacted."""


def _int(configs: Mapping[str, str], name: str, default: int) -> int:
    raw = configs.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        log.warning("topic config %s=%r is not an integer: using %d", name, raw, default)
        return default


def policy_for(topic_configs: Mapping[str, str], defaults: RetentionPolicy) -> RetentionPolicy:
    """``defaults`` (the broker's flags) overridden by a topic's configs."""
    policy = topic_configs.get("cleanup.policy")
    delete, compact_ = defaults.delete, defaults.compact
    if policy is not None:
        parts = {p.strip() for p in policy.split(",") if p.strip()}
        if parts and parts <= {"delete", "compact"}:
            delete, compact_ = "delete" in parts, "compact" in parts
        else:
            log.warning("topic config cleanup.policy=%r unknown: using the default", policy)
    return RetentionPolicy(
        delete=delete,
        compact=compact_,
        retention_ms=_int(topic_configs, "retention.ms", defaults.retention_ms),
        retention_bytes=_int(topic_configs, "retention.bytes", defaults.retention_bytes),
        delete_retention_ms=_int(
            topic_configs, "delete.retention.ms", defaults.delete_retention_ms
        ),
        min_compaction_lag_ms=_int(
            topic_configs, "min.compaction.lag.ms", defaults.min_compaction_lag_ms
        ),
    )


def apply_policy(
    plog: Log, policy: RetentionPolicy, *, archive: str | None = None, now_ms: int | None = None
) -> tuple[int, int]:
    """Apply ``policy`` to one partition log; returns ``(segments removed, records
    compacted away)``. Raises what the storage functions raise."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    removed = compacted = 0
    # never a tiered log (storage's compact refuses it, as Kafka refuses compact beside
    # remote.storage.enable): one tiered before log.cleanup.policy became compact
    tiered_config = plog.config.remote_storage_enable or plog.remote_tier is not None
    if policy.compact and not tiered_config:
        res = compact(
            plog,
            delete_retention_ms=max(policy.delete_retention_ms, 0),
            min_compaction_lag_ms=max(policy.min_compaction_lag_ms, 0),
            now_ms=now,
        )
        compacted = len(res.offsets)
    # a tiered log's retention (both tiers) runs in the tiering task (tiering.py)
    if policy.delete and not tiered(plog):
        if policy.retention_ms >= 0:
            removed += len(
                trim_by_age(plog, policy.retention_ms, now_ms=now, archive=archive).segments
            )
        if policy.retention_bytes >= 0:
            removed += len(trim_by_size(plog, policy.retention_bytes, archive=archive).segments)
    return removed, compacted


def tiered(plog: Log) -> bool:
    """The log has ``remote.storage.enable`` and a remote tier."""
    return plog.config.remote_storage_enable and plog.remote_tier is not None


def consumed_policy(topic_configs: Mapping[str, str]) -> tuple[str, ...] | None:
    """The groups whose commits bound ``seglog.retention.consumed`` on a topic; None when
    it is off. An empty tuple (on, but no group named) trims nothing."""
    if topic_configs.get(CONSUMED, "false").strip().lower() != "true":
        return None
    return consumed_groups(topic_configs.get(CONSUMED_GROUPS))


class RetentionTask:
    """The broker's retention thread: ``start()``, then ``stop()`` before the data
    directory closes (waits for the pass in progress to finish its current partition)."""

    def __init__(
        self,
        data_dir: DataDir,
        defaults: RetentionPolicy,
        *,
        interval_ms: int,
        archive_command: str | None = None,
        committed: CommittedFloor | None = None,
        idle_handle_s: float = IDLE_HANDLE_S,
    ) -> None:
        self.data_dir = data_dir
        self.idle_handle_s = idle_handle_s
        """Each pass closes segment handles unused for this long (``Log.gc``)."""
        self.committed = committed
        """Committed offsets for ``seglog.retention.consumed`` (None: never trims so)."""
        self.defaults = defaults
        self.interval_s = max(interval_ms, 1) / 1000
        self.archive_command = archive_command
        self.passes = 0
        """Completed passes over every partition (tests wait on it)."""
        self._warned: set[str] = set()
        self._thread = PeriodicThread(
            "seglog-retention", self.interval_s, self.run_once, what="retention"
        )

    def start(self) -> None:
        """Start the thread: a pass every ``interval_ms``."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the partition being worked on; idempotent."""
        self._thread.stop()

    def run_once(self) -> None:
        """One pass over every topic's partitions (the thread's body; callable directly)."""
        for name, info in self.data_dir.topics().items():
            policy = policy_for(info.configs, self.defaults)
            mirrored = _mirror_enabled(info.configs)
            retains = policy.compact or policy.retention_ms >= 0 or policy.retention_bytes >= 0
            groups = self._consumed_groups(name, info.configs)
            for partition in range(info.partitions):
                if self._thread.stopping:
                    return
                try:
                    plog = self.data_dir.log(name, partition)
                    plog.gc(self.idle_handle_s)
                    if not retains and not mirrored and not groups:
                        continue
                    removed = compacted = 0
                    if retains:
                        removed, compacted = apply_policy(
                            plog, policy, archive=self.archive_command
                        )
                    if groups:
                        removed += self._trim_consumed(plog, name, partition, groups)
                    if mirrored:  # after retention/compaction: drops what they made stale
                        _sync_mirrors(plog, name, partition)
                except (SeglogError, OSError) as exc:  # deleted or closed meanwhile
                    log.debug("retention skipped %s-%d: %s", name, partition, exc)
                    continue
                if removed or compacted:
                    log.info(
                        "retention %s-%d: %d segment(s) removed, %d record(s) compacted away;"
                        " log start offset %d",
                        name,
                        partition,
                        removed,
                        compacted,
                        plog.log_start_offset,
                    )
        self.passes += 1

    def _consumed_groups(self, topic: str, configs: Mapping[str, str]) -> tuple[str, ...]:
        """The groups of ``seglog.retention.consumed`` on ``topic``; () when off (or on
        without groups: logged once, nothing trimmed)."""
        groups = consumed_policy(configs)
        if groups is None or self.committed is None:
            return ()
        if not groups and topic not in self._warned:
            self._warned.add(topic)
            log.warning(
                "topic %s: %s=true but %s names no group: nothing is trimmed by it",
                topic, CONSUMED, CONSUMED_GROUPS,
            )  # fmt: skip
        return groups

    def _trim_consumed(self, plog: Log, topic: str, partition: int, groups: Sequence[str]) -> int:
        """Remove the closed segments every group of ``groups`` committed past; 0 segments
        while one of them has no committed offset for the partition."""
        assert self.committed is not None
        floor = self.committed(groups, topic, partition)
        if floor is None:
            return 0
        return len(trim_segments_below(plog, floor, archive=self.archive_command).segments)


_MIRROR_CONFIG = "seglog.parquet.mirror"


def _mirror_enabled(configs: Mapping[str, str]) -> bool:
    return configs.get(_MIRROR_CONFIG, "false").strip().lower() == "true"


def _sync_mirrors(plog: Log, topic: str, partition: int) -> None:
    """Columnar mirrors of the closed segments (``seglog.columnar``, needs pyarrow: imported
    only for topics that ask for mirrors)."""
    try:
        from seglog.columnar import sync_log_mirrors  # noqa: PLC0415 - optional pyarrow
    except ImportError as exc:
        log.error("%s=true on topic %s needs pyarrow (pip install 'seglog[spark]'): %s",
                  _MIRROR_CONFIG, topic, exc)  # fmt: skip
        return
    report = sync_log_mirrors(plog, topic, partition)
    if report.built or report.removed:
        log.info(
            "mirrors %s-%d: %d Parquet file(s) written, %d stale removed",
            topic, partition, len(report.built), len(report.removed),
        )  # fmt: skip


def start_retention(
    config: BrokerConfig, data_dir: DataDir, committed: CommittedFloor | None = None
) -> RetentionTask:
    """The broker's retention thread from its flags, started; ``committed`` serves
    ``seglog.retention.consumed``."""
    parts = {p.strip() for p in config.log_cleanup_policy.split(",")}
    defaults = RetentionPolicy(
        delete="delete" in parts,
        compact="compact" in parts,
        retention_ms=config.log_retention_ms,
        retention_bytes=config.log_retention_bytes,
        delete_retention_ms=config.log_cleaner_delete_retention_ms,
        min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
    )
    task = RetentionTask(
        data_dir,
        defaults,
        interval_ms=config.log_retention_check_interval_ms,
        archive_command=config.log_archive_command,
        committed=committed,
    )
    task.start()
    return task
