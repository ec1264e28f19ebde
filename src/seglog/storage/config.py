"""LogConfig (Kafka topic config names) and AppendInfo."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import NamedTuple

__all__ = [
    "FLUSH_NEVER",
    "TIERED_COMPACT_MESSAGE",
    "AppendInfo",
    "LogConfig",
    "check_tiered_cleanup_policy",
]

FLUSH_NEVER = 1 << 62
"""``flush_messages`` at or above this (Kafka's default is Long.MAX_VALUE, 2**63 - 1)
means never fsync on a message count: background/OS flushing only."""

_KAFKA_NAMES = {
    "segment_bytes": "segment.bytes",
    "segment_messages": "seglog.segment.messages",
    "segment_ms": "segment.ms",
    "index_interval_bytes": "index.interval.bytes",
    "max_message_bytes": "max.message.bytes",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "message_timestamp_type": "message.timestamp.type",
    "key_index": "seglog.key.index",
    "check_crcs": "seglog.check.crcs",
    "remote_storage_enable": "remote.storage.enable",
    "local_retention_ms": "local.retention.ms",
    "local_retention_bytes": "local.retention.bytes",
}
_BOOLEANS = frozenset(("key_index", "check_crcs", "remote_storage_enable"))


@dataclass(frozen=True)
class LogConfig:
    """Per-log settings, named after Kafka's topic configs (``to_kafka_configs``).

    Durability: with ``flush_messages`` and ``flush_ms`` both None (the default) appended
    data becomes visible (high watermark) only once fsynced, and concurrent appends share
    one fsync (group commit). Setting either relaxes it: data is visible at once, and an
    fsync runs in the background every ``flush_messages`` messages and/or ``flush_ms`` ms.
    ``flush_messages`` >= ``FLUSH_NEVER`` (2**62; Kafka's default Long.MAX_VALUE) never
    fsyncs on a count: data is visible and acknowledged at once and reaches the disk
    when the OS writes it back, at a roll (the rolled segment is fsynced in the
    background, as Kafka does), on ``sync()`` and at ``close()`` (plus every
    ``flush_ms`` ms if set).
    """

    segment_bytes: int = 1 << 30
    """segment.bytes: roll when the active segment would exceed this many bytes
    (at most 2**31 - 1: index positions are u32)."""
    segment_messages: int | None = None
    """seglog.segment.messages (NATS's max msgs per block): roll before an append would
    take the active segment past this many offsets (records); None = no limit. An
    append to an empty segment is never refused (one append may exceed it)."""
    segment_ms: int = 7 * 24 * 3600 * 1000
    """segment.ms: roll when the active segment's first append is this many ms old."""
    index_interval_bytes: int = 4096
    """index.interval.bytes: bytes of log between two sparse offset index entries."""
    max_message_bytes: int = 1048588
    """max.message.bytes: largest record batch accepted, in bytes."""
    flush_messages: int | None = None
    """flush.messages: None = fsync before acknowledging (default); N = background fsync
    every N messages; N >= ``FLUSH_NEVER`` (2**62) = never on a count (OS / roll only)."""
    flush_ms: int | None = None
    """flush.ms: background fsync when unsynced data is this many ms old (relaxed)."""
    message_timestamp_type: str = "CreateTime"
    """message.timestamp.type: "CreateTime" (keep the producer's) or "LogAppendTime"."""
    key_index: bool = False
    """seglog: keep an in-memory key index (last offset per key) for get_by_key; built at
    open by decoding every batch, updated on append (costs per-record decoding)."""
    check_crcs: bool = True
    """seglog.check.crcs (the Kafka consumer's check.crcs): ``consume``, ``get``,
    ``consume_columns`` and ``consume_by_key`` verify the CRC-32C of every record batch
    they decode and raise CorruptRecordError naming its offset on a mismatch (bit rot
    below the recovery point, which open does not rescan). False skips the check."""
    remote_storage_enable: bool = False
    """remote.storage.enable (KIP-405): copy closed segments to the remote store given to
    ``Log.open(remote=...)`` (``seglog.storage.tier_sync``), read them back transparently."""
    local_retention_ms: int = -2
    """local.retention.ms: with remote storage, keep uploaded segments on local disk this
    long (ms) after their newest record; -2 = ``retention.ms`` (Kafka's default)."""
    local_retention_bytes: int = -2
    """local.retention.bytes: with remote storage, bound of the local segments' bytes
    (uploaded ones beyond it are deleted locally); -2 = ``retention.bytes``."""

    def __post_init__(self) -> None:
        if not 64 <= self.segment_bytes <= (1 << 31) - 1:
            raise ValueError(f"segment.bytes {self.segment_bytes} outside [64, 2**31-1]")
        if self.segment_messages is not None and self.segment_messages <= 0:
            raise ValueError("seglog.segment.messages must be positive")
        if self.segment_ms <= 0 or self.index_interval_bytes <= 0:
            raise ValueError("segment.ms and index.interval.bytes must be positive")
        if self.max_message_bytes < 61:
            raise ValueError("max.message.bytes below a record batch header (61 bytes)")
        if self.flush_messages is not None and self.flush_messages <= 0:
            raise ValueError("flush.messages must be positive")
        if self.flush_ms is not None and self.flush_ms <= 0:
            raise ValueError("flush.ms must be positive")
        if self.local_retention_ms < -2 or self.local_retention_bytes < -2:
            raise ValueError("local.retention.ms/bytes must be >= -2")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type {self.message_timestamp_type!r}")

    @property
    def fsync_before_ack(self) -> bool:
        """True under the default durability policy (no flush.messages / flush.ms)."""
        return self.flush_messages is None and self.flush_ms is None

    @property
    def flush_every(self) -> int | None:
        """Records between two background fsyncs: ``flush_messages``, None when it is
        unset or at least ``FLUSH_NEVER`` (never on a count)."""
        fm = self.flush_messages
        return fm if fm is not None and fm < FLUSH_NEVER else None

    @classmethod
    def from_kafka_configs(cls, configs: Mapping[str, str]) -> LogConfig:
        """Build from Kafka names (``{"segment.bytes": "1048576"}``); unknown names are
        ignored (retention.ms etc. belong to other layers). ValueError on bad values.
        ``flush.messages`` >= 2**62 is kept (never fsync on a count, relaxed durability);
        ``flush.ms`` >= 2**62 becomes None (no timer)."""
        kwargs: dict[str, object] = {}
        for f in fields(cls):
            raw = configs.get(_KAFKA_NAMES[f.name])
            if raw is None:
                continue
            if f.name == "message_timestamp_type":
                kwargs[f.name] = raw
            elif f.name in _BOOLEANS:
                kwargs[f.name] = raw.lower() == "true"
            else:
                value = int(raw)
                if f.name == "flush_ms" and value >= FLUSH_NEVER:
                    kwargs[f.name] = None  # Kafka's "Long.MAX_VALUE" = no timer
                else:
                    kwargs[f.name] = value
        return cls(**kwargs)  # type: ignore[arg-type]

    def to_kafka_configs(self) -> dict[str, str]:
        """Kafka names → string values for every setting (None settings omitted)."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[_KAFKA_NAMES[f.name]] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
        return out


TIERED_COMPACT_MESSAGE = "Remote log storage is unsupported for the compacted topics"
"""Kafka's message (LogConfig, Kafka 4.0) refusing ``remote.storage.enable=true`` beside a
``cleanup.policy`` containing ``compact``."""


def check_tiered_cleanup_policy(
    configs: Mapping[str, str | None], default_cleanup_policy: str = "delete"
) -> None:
    """Kafka's rule for tiered topics (KIP-405; LogConfig's check of a topic's configs): a
    topic with ``remote.storage.enable=true`` may not be compacted, i.e. its
    ``cleanup.policy`` (the topic's own, else ``default_cleanup_policy``: the broker's
    ``log.cleanup.policy``) may not contain ``compact``. ``configs`` are Kafka topic
    config names to values (None: unset). Raises ValueError with Kafka's message (the
    broker answers 40 INVALID_CONFIG)."""
    enabled = (configs.get("remote.storage.enable") or "false").strip().lower() == "true"
    policy = configs.get("cleanup.policy")
    policy = default_cleanup_policy if policy is None else policy
    if enabled and "compact" in {p.strip().lower() for p in policy.split(",")}:
        raise ValueError(f"{TIERED_COMPACT_MESSAGE} (cleanup.policy={policy})")


class AppendInfo(NamedTuple):
    """What ``Log.append`` assigned (Kafka's LogAppendInfo, reduced)."""

    base_offset: int
    """First offset assigned."""
    last_offset: int
    """Last offset assigned."""
    log_append_time_ms: int
    """Append time in ms under LogAppendTime, else -1."""
    record_count: int
    """Records appended (sum of the batches' recordCount)."""
    max_timestamp_ms: int
    """Largest batch max timestamp (ms) appended."""
