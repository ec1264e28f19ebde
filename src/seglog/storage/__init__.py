"""seglog's storage engine: partition logs of record batches v2 in Kafka's on-disk format.

One :class:`Log` is one partition, a directory of segments (``%020d.log`` + ``.index`` +
``.timeindex``). :class:`DataDir` holds the topics of a broker. See docs/internals.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog._lazy import load_export

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel, LogAPI

    # Backup, snapshot, restore (InfluxDB's Snapshot/Restore)
    # Logs and their configuration
    from seglog.storage.config import (
        FLUSH_NEVER,
        AppendInfo,
        LogConfig,
        check_tiered_cleanup_policy,
    )
    from seglog.storage.fileio.counters import FileCounters
    from seglog.storage.fileio.files import atomic_file, fsync_dir
    from seglog.storage.fileio.files import write_small_file as atomic_write

    # Blocking consume (cancellation token for the sync variant)
    from seglog.storage.log.blocking import POLL_S, CancelToken, start_offset
    from seglog.storage.log.datadir import (
        MAX_PARTITIONS,
        DataDir,
        TopicInfo,
        validate_topic_name,
    )
    from seglog.storage.log.keys import rebuild_key_index
    from seglog.storage.log.log import FileSlice, Log, open_log

    # Logs in RAM (a private tmpfs directory, removed at close)
    from seglog.storage.log.memory import MemoryLog, NoMemoryFilesystemError, memory_log

    # Durable subscriptions (NATS Streaming's durable subscribers)
    from seglog.storage.log.range_map import RangeMap
    from seglog.storage.log.stats import LogStats, SegmentInfo, SegmentStats
    from seglog.storage.log.subscription import Delivery, Subscription

    # Typed logs (key/value codecs)
    from seglog.storage.log.typed import (
        BYTES,
        JSON,
        STR,
        VARINT,
        Codec,
        TypedLog,
        TypedMessage,
        open_typed_log,
    )

    # Columnar records (vectorised decoding of record batches)
    from seglog.storage.record.batch import BATCH_HEADER, BatchHeader, parse_header, whole_batches
    from seglog.storage.record.columns import RecordColumns, decode_columns

    # Transaction markers (Kafka's control batches)
    from seglog.storage.record.control import (
        control_marker,
        encode_control_batch,
        is_control_batch,
        is_transactional_batch,
    )
    from seglog.storage.record.encode import (
        encode_record_columns,
        encode_record_columns_into,
        encode_records,
    )

    # Messages (embedded API)
    from seglog.storage.record.message import (
        OFFSET_NEWEST,
        OFFSET_OLDEST,
        Message,
        new_batch_builder,
    )
    from seglog.storage.record.varint import I64, decode_varints
    from seglog.storage.remote.cache import RemoteCorruptionError
    from seglog.storage.remote.manifest import Manifest, RemoteSegment
    from seglog.storage.remote.purge import RemotePartition, purge_partition
    from seglog.storage.remote.store import RemoteStorage, RemoteStorageError
    from seglog.storage.remote.tier import RemoteSlice, RemoteTier, TierCounters

    # Compaction and delete by offsets (Kafka's cleaner, klevdb's Compact* / Delete)
    from seglog.storage.retention.compact import (
        DEFAULT_DELETE_RETENTION_MS,
        compact,
        compact_deletes,
        compact_updates,
    )
    from seglog.storage.retention.delete import delete_offsets

    # Retention (Kafka's retention.ms / retention.bytes / DeleteRecords, NATS's limits)
    from seglog.storage.retention.policy import ArchiveHook, TrimResult
    from seglog.storage.retention.rewrite import Removed
    from seglog.storage.retention.tiering import TierReport, start_tiering, tier_sync
    from seglog.storage.retention.trim_age import trim_by_age
    from seglog.storage.retention.trim_consumed import trim_consumed, trim_segments_below
    from seglog.storage.retention.trim_count import trim_by_count
    from seglog.storage.retention.trim_offset import trim_by_offset
    from seglog.storage.retention.trim_size import trim_by_size
    from seglog.storage.segment.format_version import FORMAT_VERSION
    from seglog.storage.tools.backup import BackupReport, backup

    # Directory tools (klevdb's Check / Recover)
    from seglog.storage.tools.check import CheckReport, check, log_directories, recover, stat
    from seglog.storage.tools.migrate import migrate
    from seglog.storage.tools.snapshot import RestoreReport, SnapshotError, restore, snapshot

# public name -> (module, name in it): imported on first use (PEP 562), so a client that
# needs only the record encoder does not pay for the whole engine (pyarrow, numpy, ...)
_LAZY: dict[str, tuple[str, str]] = {
    "LogAPI": ("seglog.storage.api", "LogAPI"),
    "IsolationLevel": ("seglog.storage.api", "IsolationLevel"),
    "AppendInfo": ("seglog.storage.config", "AppendInfo"),
    "ArchiveHook": ("seglog.storage.retention.policy", "ArchiveHook"),
    "BATCH_HEADER": ("seglog.storage.record.batch", "BATCH_HEADER"),
    "BatchHeader": ("seglog.storage.record.batch", "BatchHeader"),
    "parse_header": ("seglog.storage.record.batch", "parse_header"),
    "whole_batches": ("seglog.storage.record.batch", "whole_batches"),
    "BYTES": ("seglog.storage.log.typed", "BYTES"),
    "BackupReport": ("seglog.storage.tools.backup", "BackupReport"),
    "CancelToken": ("seglog.storage.log.blocking", "CancelToken"),
    "CheckReport": ("seglog.storage.tools.check", "CheckReport"),
    "Codec": ("seglog.storage.log.typed", "Codec"),
    "DEFAULT_DELETE_RETENTION_MS": (
        "seglog.storage.retention.compact",
        "DEFAULT_DELETE_RETENTION_MS",
    ),
    "DataDir": ("seglog.storage.log.datadir", "DataDir"),
    "MAX_PARTITIONS": ("seglog.storage.log.datadir", "MAX_PARTITIONS"),
    "Delivery": ("seglog.storage.log.subscription", "Delivery"),
    "FLUSH_NEVER": ("seglog.storage.config", "FLUSH_NEVER"),
    "FORMAT_VERSION": ("seglog.storage.segment.format_version", "FORMAT_VERSION"),
    "FileCounters": ("seglog.storage.fileio.counters", "FileCounters"),
    "FileSlice": ("seglog.storage.log.log", "FileSlice"),
    "I64": ("seglog.storage.record.varint", "I64"),
    "JSON": ("seglog.storage.log.typed", "JSON"),
    "Log": ("seglog.storage.log.log", "Log"),
    "LogConfig": ("seglog.storage.config", "LogConfig"),
    "LogStats": ("seglog.storage.log.stats", "LogStats"),
    "MemoryLog": ("seglog.storage.log.memory", "MemoryLog"),
    "Message": ("seglog.storage.record.message", "Message"),
    "OFFSET_NEWEST": ("seglog.storage.record.message", "OFFSET_NEWEST"),
    "NoMemoryFilesystemError": ("seglog.storage.log.memory", "NoMemoryFilesystemError"),
    "OFFSET_OLDEST": ("seglog.storage.record.message", "OFFSET_OLDEST"),
    "POLL_S": ("seglog.storage.log.blocking", "POLL_S"),
    "RangeMap": ("seglog.storage.log.range_map", "RangeMap"),
    "RecordColumns": ("seglog.storage.record.columns", "RecordColumns"),
    "Removed": ("seglog.storage.retention.rewrite", "Removed"),
    "RestoreReport": ("seglog.storage.tools.snapshot", "RestoreReport"),
    "STR": ("seglog.storage.log.typed", "STR"),
    "Subscription": ("seglog.storage.log.subscription", "Subscription"),
    "SegmentInfo": ("seglog.storage.log.stats", "SegmentInfo"),
    "SegmentStats": ("seglog.storage.log.stats", "SegmentStats"),
    "SnapshotError": ("seglog.storage.tools.snapshot", "SnapshotError"),
    "TopicInfo": ("seglog.storage.log.datadir", "TopicInfo"),
    "TrimResult": ("seglog.storage.retention.policy", "TrimResult"),
    "TypedLog": ("seglog.storage.log.typed", "TypedLog"),
    "TypedMessage": ("seglog.storage.log.typed", "TypedMessage"),
    "VARINT": ("seglog.storage.log.typed", "VARINT"),
    "atomic_file": ("seglog.storage.fileio.files", "atomic_file"),
    "atomic_write": ("seglog.storage.fileio.files", "write_small_file"),
    "backup": ("seglog.storage.tools.backup", "backup"),
    "check": ("seglog.storage.tools.check", "check"),
    "compact": ("seglog.storage.retention.compact", "compact"),
    "compact_deletes": ("seglog.storage.retention.compact", "compact_deletes"),
    "compact_updates": ("seglog.storage.retention.compact", "compact_updates"),
    "decode_columns": ("seglog.storage.record.columns", "decode_columns"),
    "control_marker": ("seglog.storage.record.control", "control_marker"),
    "encode_control_batch": ("seglog.storage.record.control", "encode_control_batch"),
    "is_control_batch": ("seglog.storage.record.control", "is_control_batch"),
    "is_transactional_batch": ("seglog.storage.record.control", "is_transactional_batch"),
    "decode_varints": ("seglog.storage.record.varint", "decode_varints"),
    "delete_offsets": ("seglog.storage.retention.delete", "delete_offsets"),
    "encode_record_columns": ("seglog.storage.record.encode", "encode_record_columns"),
    "encode_record_columns_into": ("seglog.storage.record.encode", "encode_record_columns_into"),
    "encode_records": ("seglog.storage.record.encode", "encode_records"),
    "fsync_dir": ("seglog.storage.fileio.files", "fsync_dir"),
    "log_directories": ("seglog.storage.tools.check", "log_directories"),
    "memory_log": ("seglog.storage.log.memory", "memory_log"),
    "migrate": ("seglog.storage.tools.migrate", "migrate"),
    "new_batch_builder": ("seglog.storage.record.message", "new_batch_builder"),
    "open_log": ("seglog.storage.log.log", "open_log"),
    "open_typed_log": ("seglog.storage.log.typed", "open_typed_log"),
    "rebuild_key_index": ("seglog.storage.log.keys", "rebuild_key_index"),
    "recover": ("seglog.storage.tools.check", "recover"),
    "restore": ("seglog.storage.tools.snapshot", "restore"),
    "snapshot": ("seglog.storage.tools.snapshot", "snapshot"),
    "start_offset": ("seglog.storage.log.blocking", "start_offset"),
    "stat": ("seglog.storage.tools.check", "stat"),
    "trim_by_age": ("seglog.storage.retention.trim_age", "trim_by_age"),
    "trim_by_count": ("seglog.storage.retention.trim_count", "trim_by_count"),
    "trim_by_offset": ("seglog.storage.retention.trim_offset", "trim_by_offset"),
    "trim_by_size": ("seglog.storage.retention.trim_size", "trim_by_size"),
    "trim_consumed": ("seglog.storage.retention.trim_consumed", "trim_consumed"),
    "trim_segments_below": ("seglog.storage.retention.trim_consumed", "trim_segments_below"),
    "Manifest": ("seglog.storage.remote.manifest", "Manifest"),
    "RemoteSegment": ("seglog.storage.remote.manifest", "RemoteSegment"),
    "RemoteCorruptionError": ("seglog.storage.remote.cache", "RemoteCorruptionError"),
    "RemotePartition": ("seglog.storage.remote.purge", "RemotePartition"),
    "purge_partition": ("seglog.storage.remote.purge", "purge_partition"),
    "RemoteStorage": ("seglog.storage.remote.store", "RemoteStorage"),
    "RemoteStorageError": ("seglog.storage.remote.store", "RemoteStorageError"),
    "RemoteTier": ("seglog.storage.remote.tier", "RemoteTier"),
    "RemoteSlice": ("seglog.storage.remote.tier", "RemoteSlice"),
    "TierCounters": ("seglog.storage.remote.tier", "TierCounters"),
    "TierReport": ("seglog.storage.retention.tiering", "TierReport"),
    "check_tiered_cleanup_policy": ("seglog.storage.config", "check_tiered_cleanup_policy"),
    "tier_sync": ("seglog.storage.retention.tiering", "tier_sync"),
    "start_tiering": ("seglog.storage.retention.tiering", "start_tiering"),
    "validate_topic_name": ("seglog.storage.log.datadir", "validate_topic_name"),
}

__all__ = [  # noqa: RUF022  (grouped by topic, not sorted)
    # logs and their configuration (the contract: seglog.storage.api)
    "AppendInfo",
    "FLUSH_NEVER",
    "LogAPI",
    "IsolationLevel",
    "FileSlice",
    "Log",
    "LogConfig",
    "open_log",
    # logs in RAM (memory only: a private tmpfs directory removed at close)
    "MemoryLog",
    "NoMemoryFilesystemError",
    "memory_log",
    # messages (embedded API)
    "Message",
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    # columnar records
    "RecordColumns",
    "decode_columns",
    # transaction markers (control batches)
    "control_marker",
    "encode_control_batch",
    "is_control_batch",
    "is_transactional_batch",
    "decode_varints",
    # data directories
    "DataDir",
    "MAX_PARTITIONS",
    "TopicInfo",
    "atomic_file",
    "atomic_write",
    "validate_topic_name",
    # directory tools
    "CheckReport",
    "check",
    "recover",
    "stat",
    # format version and migration
    "FORMAT_VERSION",
    "migrate",
    # indexes
    "rebuild_key_index",
    # blocking consume
    "CancelToken",
    # durable subscriptions
    "Delivery",
    "RangeMap",
    "Subscription",
    # typed logs
    "BYTES",
    "JSON",
    "STR",
    "VARINT",
    "Codec",
    "TypedLog",
    "TypedMessage",
    "open_typed_log",
    # backup, snapshot, restore
    "BackupReport",
    "RestoreReport",
    "SnapshotError",
    "backup",
    "restore",
    "snapshot",
    # retention
    "ArchiveHook",
    "TrimResult",
    "trim_by_age",
    "trim_by_count",
    "trim_by_offset",
    "trim_by_size",
    "trim_consumed",
    "trim_segments_below",
    # tiered storage (KIP-405)
    "Manifest",
    "RemoteCorruptionError",
    "RemotePartition",
    "RemoteSegment",
    "RemoteSlice",
    "RemoteStorage",
    "RemoteStorageError",
    "RemoteTier",
    "TierCounters",
    "TierReport",
    "check_tiered_cleanup_policy",
    "purge_partition",
    "start_tiering",
    "tier_sync",
    # compaction and delete by offsets
    "Removed",
    "compact",
    "compact_deletes",
    "compact_updates",
    "delete_offsets",
    # statistics
    "FileCounters",
    "LogStats",
    "SegmentInfo",
    "SegmentStats",
    # building blocks the upper layers use (record batch v2 encoding and headers, blocking
    # reads, directory walking, defaults)
    "BATCH_HEADER",
    "BatchHeader",
    "parse_header",
    "whole_batches",
    "DEFAULT_DELETE_RETENTION_MS",
    "I64",
    "POLL_S",
    "encode_record_columns",
    "encode_record_columns_into",
    "encode_records",
    "fsync_dir",
    "log_directories",
    "new_batch_builder",
    "start_offset",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    return load_export(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
