"""seglog's storage engine: partition logs of record batches v2 in Kafka's on-disk format.

One :class:`Log` is one partition, a directory of segments (``%020d.log`` + ``.index`` +
``.timeindex``). :class:`DataDir` holds the topics of a broker. See docs/DESIGN.md.
"""

from __future__ import annotations

# Backup, snapshot, restore (InfluxDB's Snapshot/Restore)
from seglog.storage._backup import BackupReport, backup

# Blocking consume (cancellation token for the sync variant)
from seglog.storage._blocking import POLL_S, CancelToken, start_offset

# Directory tools (klevdb's Check / Recover)
from seglog.storage._check import CheckReport, check, log_directories, recover, stat

# Columnar records (vectorised decoding of record batches)
from seglog.storage._columns import BATCH_HEADER, RecordColumns, decode_columns

# Compaction and delete by offsets (Kafka's cleaner, klevdb's Compact* / Delete)
from seglog.storage._compact import (
    DEFAULT_DELETE_RETENTION_MS,
    compact,
    compact_deletes,
    compact_updates,
)

# Logs and their configuration
from seglog.storage._config import AppendInfo, LogConfig
from seglog.storage._datadir import DataDir, TopicInfo, validate_topic_name
from seglog.storage._delete import delete_offsets
from seglog.storage._encode import encode_records
from seglog.storage._files import write_small_file as atomic_write
from seglog.storage._format import FORMAT_VERSION, migrate
from seglog.storage._keyindex import rebuild_key_index
from seglog.storage._log import FileSlice, Log, open_log

# Messages (embedded API)
from seglog.storage._message import OFFSET_NEWEST, OFFSET_OLDEST, Message, new_batch_builder

# Retention (Kafka's retention.ms / retention.bytes / DeleteRecords, NATS's limits)
from seglog.storage._retention import ArchiveHook, TrimResult
from seglog.storage._rewrite import Removed
from seglog.storage._snapshot import RestoreReport, SnapshotError, restore, snapshot
from seglog.storage._stats import FileCounters, LogStats, SegmentStats
from seglog.storage._trim_age import trim_by_age
from seglog.storage._trim_count import trim_by_count
from seglog.storage._trim_offset import trim_by_offset
from seglog.storage._trim_size import trim_by_size

# Typed logs (key/value codecs)
from seglog.storage._typed import (
    BYTES,
    JSON,
    STR,
    VARINT,
    Codec,
    TypedLog,
    TypedMessage,
    open_typed_log,
)
from seglog.storage._varint import I64

__all__ = [  # noqa: RUF022  (grouped by topic, as STYLE.md asks)
    # logs and their configuration
    "AppendInfo",
    "FileSlice",
    "Log",
    "LogConfig",
    "open_log",
    # messages (embedded API)
    "Message",
    "OFFSET_NEWEST",
    "OFFSET_OLDEST",
    # columnar records
    "RecordColumns",
    "decode_columns",
    # data directories
    "DataDir",
    "TopicInfo",
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
    # compaction and delete by offsets
    "Removed",
    "compact",
    "compact_deletes",
    "compact_updates",
    "delete_offsets",
    # statistics
    "FileCounters",
    "LogStats",
    "SegmentStats",
    # building blocks the upper layers use (record batch v2 encoding and headers, blocking
    # reads, directory walking, defaults)
    "BATCH_HEADER",
    "DEFAULT_DELETE_RETENTION_MS",
    "I64",
    "POLL_S",
    "encode_records",
    "log_directories",
    "new_batch_builder",
    "start_offset",
]
