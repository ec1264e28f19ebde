"""The one error root of seglog, and the hierarchy every layer raises.

```
SeglogError                         root: catch this to catch everything seglog raises
├── StorageError                    the storage engine (seglog.storage)
│   ├── CorruptRecordError          a record batch failed a structural or CRC-32C check
│   ├── InvalidRecordError          a well-formed batch seglog will not store: magic != 2,
│   │                               empty batch, control batch from a client
│   ├── RecordTooLargeError         batch over max.message.bytes
│   ├── InvalidOffsetError          offset outside [log start offset, log end offset]
│   ├── NotFoundError               no record at that offset, key or time (deleted,
│   │                               compacted away, never written): never a directory
│   ├── DirectoryNotFoundError      a log, data or backup directory that does not exist,
│   │                               or a directory holding no partition log (also a
│   │                               FileNotFoundError, never a NotFoundError)
│   ├── NoIndexError                the log has no key index (opened without key_index)
│   ├── LogCorruptedError           a segment is corrupt in its middle; open refuses
│   │                               unless recovery is asked for
│   ├── FormatVersionError          a partition directory's ``seglog-format`` version is
│   │                               newer than this seglog, older (migrate first) or garbage
│   ├── LogClosedError              the log was closed (or taken offline after an fsync
│   │                               failure: never retried, PostgreSQL's "fsyncgate")
│   ├── ReadOnlyError               a write on a log opened read-only
│   ├── InvalidTopicError           a topic name breaking Kafka's rule
│   ├── TopicExistsError            create of an existing topic
│   ├── UnknownTopicError           a topic or partition that does not exist
│   ├── DataDirLockedError          another process owns the data directory
│   ├── RemoteStorageError          tiered storage: the object store failed or is
│   │                               unreachable (RemoteCorruptionError, also a
│   │                               CorruptRecordError: a remote object failed its CRC-32C)
│   └── SnapshotError               a truncated, corrupt or foreign snapshot stream
│                                   (defined in ``seglog.storage.tools.snapshot``)
├── BrokerError                     the broker (seglog.broker)
│   └── ProtocolError               a frame the broker cannot decode
└── DataLossError                   the Spark source (seglog.spark): offsets to read are
                                    gone and failOnDataLoss is set (also a RuntimeError)
```

These classes know nothing of Kafka's wire: the broker maps them to Kafka error codes in
one table, ``seglog.broker.protocol.errors`` (built from ``kafka.errors``).
"""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "CorruptRecordError",
    "DataDirLockedError",
    "DataLossError",
    "DirectoryNotFoundError",
    "FormatVersionError",
    "InvalidOffsetError",
    "InvalidRecordError",
    "InvalidTopicError",
    "LogClosedError",
    "LogCorruptedError",
    "NoIndexError",
    "NotFoundError",
    "ProtocolError",
    "ReadOnlyError",
    "RecordTooLargeError",
    "RemoteStorageError",
    "SeglogError",
    "StorageError",
    "TopicExistsError",
    "UnknownTopicError",
]


class SeglogError(Exception):
    """Root of every exception seglog raises."""


class StorageError(SeglogError):
    """Raised by ``seglog.storage``: a log, segment, index or data directory operation."""


class CorruptRecordError(StorageError):
    """A record batch failed a check: length, magic, CRC-32C, or record count/offsets."""


class InvalidRecordError(StorageError):
    """A well-formed record batch that seglog refuses to store (magic != 2, empty)."""


class RecordTooLargeError(StorageError):
    """A record batch larger than the log's ``max.message.bytes``."""


class InvalidOffsetError(StorageError):
    """An offset before the log start offset or after the log end (next) offset."""


class NotFoundError(StorageError):
    """Nothing at that offset, key or time: deleted, compacted away, or never written.
    Never raised for a missing directory (that is :class:`DirectoryNotFoundError`)."""


class DirectoryNotFoundError(StorageError, FileNotFoundError):
    """A log, data or backup directory that does not exist, or a directory that holds no
    partition log (``check``, ``backup``... of an empty directory). A ``FileNotFoundError``
    too, so ``except FileNotFoundError`` / ``except OSError`` catch it; deliberately not a
    :class:`NotFoundError`, which means a missing record, key or offset only."""


class NoIndexError(StorageError):
    """A lookup by key on a log opened without a key index."""


class LogCorruptedError(StorageError):
    """A segment is corrupt before its tail; opening needs explicit recovery."""


class FormatVersionError(StorageError):
    """A partition directory's format version (``seglog-format``) this seglog cannot open:
    newer (upgrade seglog), older (run ``seglog migrate``) or unreadable."""


class LogClosedError(StorageError):
    """The log is closed, or offline after an fsync failure (never retried)."""


class ReadOnlyError(StorageError):
    """A write (publish, append, trim, compact) on a log opened read-only."""


class InvalidTopicError(StorageError):
    """A topic name outside Kafka's rule: ``[a-zA-Z0-9._-]``, 1-249 chars, not . or .."""


class TopicExistsError(StorageError):
    """CreateTopics of a topic that already exists."""


class UnknownTopicError(StorageError):
    """A topic or partition that does not exist in the data directory."""


class DataDirLockedError(StorageError):
    """Another process holds the data directory's writer lock (``.lock``)."""


class RemoteStorageError(StorageError):
    """Tiered storage: the object store failed (unreachable, refused, timed out) or an
    object the manifest names is missing."""


class BrokerError(SeglogError):
    """Raised by ``seglog.broker``."""


class ProtocolError(BrokerError):
    """A request frame that cannot be decoded (the connection is closed, as Kafka does)."""


class DataLossError(SeglogError, RuntimeError):
    """Offsets to read are gone (below the log start offset, or the partition vanished) and
    ``failOnDataLoss`` is true (Spark's Kafka source raises the same way). Raised by
    ``seglog.spark``; a ``RuntimeError`` too, as it was before it joined this tree."""
