"""seglog's storage engine: partition logs of record batches v2 in Kafka's on-disk format.

One :class:`Log` is one partition, a directory of segments (``%020d.log`` + ``.index`` +
``.timeindex``). :class:`DataDir` holds the topics of a broker. See docs/DESIGN.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# public name -> (module, name in it): imported on first use (PEP 562), so a client that
# needs only the record encoder does not pay for the whole engine (pyarrow, numpy, ...)
_LAZY: dict[str, tuple[str, str]] = {
    "AppendInfo": ("seglog.storage._config", "AppendInfo"),
    "ArchiveHook": ("seglog.storage._retention", "ArchiveHook"),
    "BATCH_HEADER": ("seglog.storage._columns", "BATCH_HEADER"),
    "BYTES": ("seglog.storage._typed", "BYTES"),
    "BackupReport": ("seglog.storage._backup", "BackupReport"),
    "CancelToken": ("seglog.storage._blocking", "CancelToken"),
    "CheckReport": ("seglog.storage._check", "CheckReport"),
    "Codec": ("seglog.storage._typed", "Codec"),
    "DEFAULT_DELETE_RETENTION_MS": ("seglog.storage._compact", "DEFAULT_DELETE_RETENTION_MS"),
    "DataDir": ("seglog.storage._datadir", "DataDir"),
    "FORMAT_VERSION": ("seglog.storage._format", "FORMAT_VERSION"),
    "FileCounters": ("seglog.storage._stats", "FileCounters"),
    "FileSlice": ("seglog.storage._log", "FileSlice"),
    "I64": ("seglog.storage._varint", "I64"),
    "JSON": ("seglog.storage._typed", "JSON"),
    "Log": ("seglog.storage._log", "Log"),
    "LogConfig": ("seglog.storage._config", "LogConfig"),
    "LogStats": ("seglog.storage._stats", "LogStats"),
    "Message": ("seglog.storage._message", "Message"),
    "OFFSET_NEWEST": ("seglog.storage._message", "OFFSET_NEWEST"),
    "OFFSET_OLDEST": ("seglog.storage._message", "OFFSET_OLDEST"),
    "POLL_S": ("seglog.storage._blocking", "POLL_S"),
    "RecordColumns": ("seglog.storage._columns", "RecordColumns"),
    "Removed": ("seglog.storage._rewrite", "Removed"),
    "RestoreReport": ("seglog.storage._snapshot", "RestoreReport"),
    "STR": ("seglog.storage._typed", "STR"),
    "SegmentStats": ("seglog.storage._stats", "SegmentStats"),
    "SnapshotError": ("seglog.storage._snapshot", "SnapshotError"),
    "TopicInfo": ("seglog.storage._datadir", "TopicInfo"),
    "TrimResult": ("seglog.storage._retention", "TrimResult"),
    "TypedLog": ("seglog.storage._typed", "TypedLog"),
    "TypedMessage": ("seglog.storage._typed", "TypedMessage"),
    "VARINT": ("seglog.storage._typed", "VARINT"),
    "atomic_write": ("seglog.storage._files", "write_small_file"),
    "backup": ("seglog.storage._backup", "backup"),
    "check": ("seglog.storage._check", "check"),
    "compact": ("seglog.storage._compact", "compact"),
    "compact_deletes": ("seglog.storage._compact", "compact_deletes"),
    "compact_updates": ("seglog.storage._compact", "compact_updates"),
    "decode_columns": ("seglog.storage._columns", "decode_columns"),
    "delete_offsets": ("seglog.storage._delete", "delete_offsets"),
    "encode_records": ("seglog.storage._encode", "encode_records"),
    "log_directories": ("seglog.storage._check", "log_directories"),
    "migrate": ("seglog.storage._format", "migrate"),
    "new_batch_builder": ("seglog.storage._message", "new_batch_builder"),
    "open_log": ("seglog.storage._log", "open_log"),
    "open_typed_log": ("seglog.storage._typed", "open_typed_log"),
    "rebuild_key_index": ("seglog.storage._keyindex", "rebuild_key_index"),
    "recover": ("seglog.storage._check", "recover"),
    "restore": ("seglog.storage._snapshot", "restore"),
    "snapshot": ("seglog.storage._snapshot", "snapshot"),
    "start_offset": ("seglog.storage._blocking", "start_offset"),
    "stat": ("seglog.storage._check", "stat"),
    "trim_by_age": ("seglog.storage._trim_age", "trim_by_age"),
    "trim_by_count": ("seglog.storage._trim_count", "trim_by_count"),
    "trim_by_offset": ("seglog.storage._trim_offset", "trim_by_offset"),
    "trim_by_size": ("seglog.storage._trim_size", "trim_by_size"),
    "validate_topic_name": ("seglog.storage._datadir", "validate_topic_name"),
}

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


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name (PEP 562)."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'seglog.storage' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
