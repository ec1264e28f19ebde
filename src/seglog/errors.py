"""The one error root of seglog, and the hierarchy every layer raises.

```
SeglogError                         root: catch this to catch everything seglog raises
├── StorageError                    the storage engine (seglog.storage)
│   ├── CorruptRecordError          a record batch failed a structural or CRC-32C check
│   │                               (Kafka error 2 CORRUPT_MESSAGE)
│   ├── InvalidRecordError          a well-formed batch seglog will not store: magic != 2,
│   │                               empty batch, control batch from a client
│   │                               (Kafka error 87 INVALID_RECORD)
│   ├── RecordTooLargeError         batch over max.message.bytes (Kafka error 10)
│   ├── InvalidOffsetError          offset outside [log start offset, log end offset]
│   │                               (Kafka error 1 OFFSET_OUT_OF_RANGE)
│   ├── NotFoundError               the offset or key existed but is gone (deleted,
│   │                               compacted), or no message at or after a time
│   ├── NoIndexError                the log has no key index (opened without key_index)
│   ├── LogCorruptedError           a segment is corrupt in its middle; open refuses
│   │                               unless recovery is asked for
│   ├── FormatVersionError          a partition directory's ``seglog-format`` version is
│   │                               newer than this seglog, older (migrate first) or garbage
│   ├── LogClosedError              the log was closed (or taken offline after an fsync
│   │                               failure, see RELIABILITY-NOTES "fsyncgate")
│   ├── ReadOnlyError               a write on a log opened read-only
│   ├── InvalidTopicError           a topic name breaking Kafka's rule
│   │                               (Kafka error 17 INVALID_TOPIC_EXCEPTION)
│   ├── TopicExistsError            create of an existing topic (Kafka error 36)
│   ├── UnknownTopicError           a topic or partition that does not exist (Kafka error 3)
│   └── DataDirLockedError          another process owns the data directory
└── BrokerError                     the broker (seglog.broker)
    └── ProtocolError               a frame the broker cannot decode
```

The broker maps storage errors to Kafka error codes in one table
(`seglog.broker` ``_errors.py``); each class here names its code in ``kafka_code``.
"""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "CorruptRecordError",
    "DataDirLockedError",
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
    "SeglogError",
    "StorageError",
    "TopicExistsError",
    "UnknownTopicError",
]


class SeglogError(Exception):
    """Root of every exception seglog raises.

    ``kafka_code`` is the Kafka protocol error code a broker answers with when this
    error reaches a client (-1 UNKNOWN_SERVER_ERROR unless a subclass says otherwise).
    """

    kafka_code: int = -1


class StorageError(SeglogError):
    """Raised by ``seglog.storage``: a log, segment, index or data directory operation."""


class CorruptRecordError(StorageError):
    """A record batch failed a check: length, magic, CRC-32C, or record count/offsets."""

    kafka_code = 2


class InvalidRecordError(StorageError):
    """A well-formed record batch that seglog refuses to store (magic != 2, empty)."""

    kafka_code = 87


class RecordTooLargeError(StorageError):
    """A record batch larger than the log's ``max.message.bytes``."""

    kafka_code = 10


class InvalidOffsetError(StorageError):
    """An offset before the log start offset or after the log end (next) offset."""

    kafka_code = 1


class NotFoundError(StorageError):
    """Nothing at that offset, key or time: deleted, compacted away, or never written."""

    kafka_code = 1


class NoIndexError(StorageError):
    """A lookup by key on a log opened without a key index."""


class LogCorruptedError(StorageError):
    """A segment is corrupt before its tail; opening needs explicit recovery."""


class FormatVersionError(StorageError):
    """A partition directory's format version (``seglog-format``) this seglog cannot open:
    newer (upgrade seglog), older (run ``seglog migrate``) or unreadable."""


class LogClosedError(StorageError):
    """The log is closed, or offline after an fsync failure (never retried)."""

    kafka_code = 56  # KAFKA_STORAGE_ERROR


class ReadOnlyError(StorageError):
    """A write (publish, append, trim, compact) on a log opened read-only."""


class InvalidTopicError(StorageError):
    """A topic name outside Kafka's rule: ``[a-zA-Z0-9._-]``, 1-249 chars, not . or .."""

    kafka_code = 17


class TopicExistsError(StorageError):
    """CreateTopics of a topic that already exists."""

    kafka_code = 36


class UnknownTopicError(StorageError):
    """A topic or partition that does not exist in the data directory."""

    kafka_code = 3


class DataDirLockedError(StorageError):
    """Another process holds the data directory's writer lock (``.lock``)."""


class BrokerError(SeglogError):
    """Raised by ``seglog.broker``."""


class ProtocolError(BrokerError):
    """A request frame that cannot be decoded (the connection is closed, as Kafka does)."""
