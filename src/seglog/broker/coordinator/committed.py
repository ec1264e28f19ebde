"""Committed offsets in the internal compacted log ``__consumer_offsets`` (as Kafka keeps
them), rebuilt in memory on start.

Each OffsetCommit appends one record batch with a record per partition: the key is
Kafka's ``OffsetCommitKey`` v1 (version int16 = 1, group string, topic string, partition
int32) and the value Kafka's ``OffsetCommitValue`` v3 (version int16 = 3, offset int64,
leader epoch int32, metadata string, commit timestamp int64); deleting a group or a
partition's offset appends a tombstone (null value). Strings are int16 length + UTF-8,
length -1 for null (Kafka's group-coordinator record schemas, which kafka-python does not
carry); they are read with the broker's bounded ``WireReader``. The record batch is built
by ``log.internal_topics.keyed_batch`` (storage's encoder, byte-identical to kafka-python's
``DefaultRecordBatchBuilder``).

The same log keeps KIP-848 consumer groups (``coordinator.consumer_groups``): one record
per group whose key is seglog's own ``ConsumerGroupSnapshotKey`` (version int16 =
:data:`GROUP_SNAPSHOT_KEY_VERSION`, 32512, outside Kafka's record key versions, then the
group id as an int16-length string) and whose value is that group's whole persisted state
(version int16 = 0, then UTF-8 JSON: group epoch, assignment epoch, assignor, members with
their subscriptions, epochs and assignments, the target assignment); deleting the group
appends a tombstone. Kafka writes the same facts as several record types
(ConsumerGroupMetadata, ConsumerGroupMemberMetadata, ConsumerGroupTargetAssignment...);
one snapshot per change is simpler and compaction keeps the latest. The replay below sets
such records aside (:meth:`CommittedOffsets.group_snapshots`) instead of reading them as
offset commits.

On start a record that does not decode (a truncated field, a length past its end, another
version) is skipped with a warning naming its offset, and left in the log as it is: every
other record still applies, so the partition keeps the last commit that does decode.

Compaction and that skip could disagree: the cleaner keeps the last record of each key
(the key's bytes; values are not read, as in Kafka's LogCleaner), so a newer record of the
same key whose value does not decode would supersede an older good commit that the loader,
skipping the bad one, still restores before compaction. The choice (Kafka's): such records
are never written. Kafka's loader does not skip them either (an undecodable offset value
fails the partition's load), and its coordinator writes only what it encodes itself. Here
too the only writer is this class: Produce to the topic is refused (17
INVALID_TOPIC_EXCEPTION), every record is built by :func:`encode_key` /
:func:`encode_value`, whose strings are refused before anything is appended when longer
than an int16 length holds (ValueError; OffsetCommit answers 24 INVALID_GROUP_ID for such
a group id and 12 OFFSET_METADATA_TOO_LARGE past Kafka's 4096-character metadata limit),
and each batch's CRC-32C is checked on read, so damage on disk is a corrupt batch, never
a record that reaches the decoder. The skip is therefore only a last defence for a log
edited by hand or written by another program, and a warning names the record.

Durability is the log's: under the default policy (fsync before acknowledging) a commit is
answered only once its batch is fsynced, sharing the group commit of the partition log, so
an acknowledged commit survives a kill -9 or a power loss and commits never go back. Each
commit is one append (O(partitions in the request)); the broker's cleaner compacts the
topic (``cleanup.policy=compact``, 100 MiB segments as Kafka's
``offsets.topic.segment.bytes``). A ``consumer-offsets.json`` left by an older seglog is
appended once on start, fsynced, then removed.
"""

from __future__ import annotations

import json
import logging
import struct
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from seglog.broker.log.internal_topics import INTERNAL_TOPIC_CONFIGS, OFFSETS_TOPIC, keyed_batch
from seglog.broker.protocol.reader import WireReader
from seglog.errors import ProtocolError
from seglog.storage import OFFSET_OLDEST, DataDir, Log

__all__ = [
    "GROUP_SNAPSHOT_KEY_VERSION",
    "MAX_RECORD_STRING_BYTES",
    "OFFSETS_TOPIC",
    "PENDING_TXN_KEY_VERSION",
    "CommittedOffsets",
    "decode_key",
    "decode_value",
]

log = logging.getLogger(__name__)

_LEGACY_FILE = "consumer-offsets.json"
_KEY_VERSION, _VALUE_VERSION = 1, 3
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
MAX_RECORD_STRING_BYTES = 0x7FFF
"""The longest string (UTF-8 bytes) a record's int16 length holds."""

Committed = tuple[int, str | None]

GROUP_SNAPSHOT_KEY_VERSION = 0x7F00
"""Key version of a consumer group snapshot record (seglog's own, see the docstring)."""
_SNAPSHOT_VALUE_VERSION = 0

PENDING_TXN_KEY_VERSION = 0x7F01
"""Key version of a pending transactional offset commit (seglog's own, see
:meth:`CommittedOffsets.commit_pending`): version int16, producer id int64, group, topic
(int16-length strings), partition int32; the value is an OffsetCommitValue v3."""

PendingKey = tuple[str, str, int]
"""(group, topic, partition) of a pending transactional offset."""


def _string(text: str | None) -> bytes:
    """An int16-length string. Raises ValueError when it is longer than that holds."""
    if text is None:
        return _I16.pack(-1)
    raw = text.encode()
    if len(raw) > MAX_RECORD_STRING_BYTES:
        raise ValueError(f"a string of {len(raw)} bytes does not fit an offset commit record")
    return _I16.pack(len(raw)) + raw


def encode_key(group: str, topic: str, partition: int) -> bytes:
    """Kafka's OffsetCommitKey v1."""
    return _I16.pack(_KEY_VERSION) + _string(group) + _string(topic) + _I32.pack(partition)


def decode_key(data: bytes) -> tuple[str, str, int]:
    """(group, topic, partition) of an OffsetCommitKey v0/v1. Raises ValueError (a
    truncated field, a length past the end, a null or non-UTF-8 string, another
    version); bytes after the partition are ignored."""
    r = WireReader(memoryview(data), 0, False, "offset commit key")
    try:
        version = r.int16()
        if version not in (0, 1):
            raise ValueError(f"offset commit key version {version}")
        group, topic, partition = r.string(), r.string(), r.int32()
    except ProtocolError as exc:
        raise ValueError(f"bad offset commit key: {exc}") from None
    if group is None or topic is None:
        raise ValueError("null group or topic in an offset commit key")
    return group, topic, partition


def encode_value(offset: int, metadata: str | None, now_ms: int) -> bytes:
    """Kafka's OffsetCommitValue v3 (leader epoch -1: a single node has no epochs)."""
    return (
        _I16.pack(_VALUE_VERSION)
        + _I64.pack(offset)
        + _I32.pack(-1)
        + _string(metadata or "")
        + _I64.pack(now_ms)
    )


def _snapshot_key(group: str) -> bytes:
    return _I16.pack(GROUP_SNAPSHOT_KEY_VERSION) + _string(group)


def _snapshot_group(key: bytes) -> str | None:
    """The group id of a snapshot key; None for any other key. Raises ValueError for a
    snapshot key that does not decode."""
    if len(key) < 2 or _I16.unpack_from(key)[0] != GROUP_SNAPSHOT_KEY_VERSION:
        return None
    r = WireReader(memoryview(key), 2, False, "consumer group snapshot key")
    try:
        group = r.string()
    except ProtocolError as exc:
        raise ValueError(f"bad consumer group snapshot key: {exc}") from None
    if group is None:
        raise ValueError("null group in a consumer group snapshot key")
    return group


def _pending_key(producer_id: int, group: str, topic: str, partition: int) -> bytes:
    return (
        _I16.pack(PENDING_TXN_KEY_VERSION)
        + _I64.pack(producer_id)
        + _string(group)
        + _string(topic)
        + _I32.pack(partition)
    )


def _decode_pending_key(key: bytes) -> tuple[int, PendingKey] | None:
    """(producer id, (group, topic, partition)) of a pending-offset key; None for any other
    key. Raises ValueError for a pending key that does not decode."""
    if len(key) < 2 or _I16.unpack_from(key)[0] != PENDING_TXN_KEY_VERSION:
        return None
    r = WireReader(memoryview(key), 2, False, "pending transactional offset key")
    try:
        pid, group, topic, partition = r.int64(), r.string(), r.string(), r.int32()
    except ProtocolError as exc:
        raise ValueError(f"bad pending transactional offset key: {exc}") from None
    if group is None or topic is None:
        raise ValueError("null group or topic in a pending transactional offset key")
    return pid, (group, topic, partition)


def decode_value(data: bytes) -> Committed:
    """(offset, metadata) of an OffsetCommitValue v3. Raises ValueError (a truncated
    field, including the commit timestamp, a length past the end, non-UTF-8 metadata,
    another version); bytes after the timestamp are ignored."""
    r = WireReader(memoryview(data), 0, False, "offset commit value")
    try:
        version = r.int16()
        if version != _VALUE_VERSION:
            raise ValueError(f"offset commit value version {version}")
        offset = r.int64()
        r.int32()  # leader epoch
        metadata = r.string()
        r.int64()  # commit timestamp
    except ProtocolError as exc:
        raise ValueError(f"bad offset commit value: {exc}") from None
    return offset, metadata


class CommittedOffsets:
    """group → topic → partition → (committed offset, metadata), backed by the
    ``__consumer_offsets`` log of ``data_dir`` (created on first start). Runs on the
    broker's event loop; the returned futures complete on the log's fsync thread."""

    def __init__(self, data_dir: DataDir) -> None:
        if OFFSETS_TOPIC not in data_dir.topics():
            data_dir.create_topic(OFFSETS_TOPIC, 1, INTERNAL_TOPIC_CONFIGS)
        self._log: Log = data_dir.log(OFFSETS_TOPIC, 0)
        self._groups: dict[str, dict[str, dict[int, Committed]]] = {}
        self._snapshots: dict[str, bytes] = {}
        self._pending: dict[int, dict[PendingKey, Committed]] = {}
        self._replay()
        legacy = data_dir.path / _LEGACY_FILE
        if legacy.exists():
            self._migrate(legacy)

    @property
    def log(self) -> Log:
        """The ``__consumer_offsets`` partition log."""
        return self._log

    def _replay(self) -> None:
        offset, records = OFFSET_OLDEST, 0
        while True:
            offset, messages = self._log.consume(offset, 10_000)
            if not messages:
                break
            for m in messages:
                if m.key is None:
                    continue
                try:
                    snapshot_of = _snapshot_group(m.key)
                    if snapshot_of is not None:
                        self._keep_snapshot(snapshot_of, m.value)
                        records += 1
                        continue
                    pending = _decode_pending_key(m.key)
                    if pending is not None:
                        self._keep_pending(pending[0], pending[1], m.value)
                        records += 1
                        continue
                    group, topic, partition = decode_key(m.key)
                    if m.value is None:
                        self._forget(group, [(topic, partition)])
                    else:
                        self._set(group, topic, partition, decode_value(m.value))
                except ValueError as exc:
                    log.warning("skipping record %d of %s: %s", m.offset, OFFSETS_TOPIC, exc)
                records += 1
        if records:
            log.info(
                "loaded committed offsets of %d group(s) from %d record(s)",
                len(self._groups),
                records,
            )

    def _keep_snapshot(self, group: str, value: bytes | None) -> None:
        if value is None:
            self._snapshots.pop(group, None)
            return
        if len(value) < 2 or _I16.unpack_from(value)[0] != _SNAPSHOT_VALUE_VERSION:
            raise ValueError("consumer group snapshot value of another version")
        self._snapshots[group] = bytes(value[2:])

    def _keep_pending(self, pid: int, key: PendingKey, value: bytes | None) -> None:
        if value is None:
            offsets = self._pending.get(pid)
            if offsets is not None:
                offsets.pop(key, None)
                if not offsets:
                    del self._pending[pid]
            return
        self._pending.setdefault(pid, {})[key] = decode_value(value)

    def _migrate(self, legacy: Path) -> None:
        raw = json.loads(legacy.read_text())
        for group, topics in raw.items():
            commits = {
                (t, int(p)): (int(v[0]), v[1])
                for t, parts in topics.items()
                for p, v in parts.items()
            }
            if commits:
                self.commit(group, commits)
                self.apply(group, commits)  # made durable by the sync below, before serving
        self._log.sync()
        legacy.unlink()
        log.info("moved %d group(s) from %s into %s", len(raw), legacy.name, OFFSETS_TOPIC)

    # -- reads ------------------------------------------------------------------------

    def get(self, group: str, topic: str, partition: int) -> Committed | None:
        """(committed offset, metadata) or None when nothing is committed."""
        return self._groups.get(group, {}).get(topic, {}).get(partition)

    def partitions(self, group: str) -> dict[str, dict[int, Committed]]:
        """Every committed offset of ``group``."""
        return self._groups.get(group, {})

    def lowest(self, groups: Sequence[str], topic: str, partition: int) -> int | None:
        """The lowest committed offset of ``groups`` for one partition; None when one of
        them has none (or no group is given). Dictionary lookups only, so the retention
        thread may call it while the loop commits: it sees each group's last applied
        (durable) commit. A group that later commits back below what was removed gets
        OFFSET_OUT_OF_RANGE and resets, as after DeleteRecords."""
        lowest: int | None = None
        for group in groups:
            committed = self._groups.get(group, {}).get(topic, {}).get(partition)
            if committed is None or committed[0] < 0:
                return None
            lowest = committed[0] if lowest is None else min(lowest, committed[0])
        return lowest

    def groups(self) -> list[str]:
        """Every group with a committed offset."""
        return [g for g, topics in self._groups.items() if any(topics.values())]

    # -- writes -----------------------------------------------------------------------

    def _set(self, group: str, topic: str, partition: int, value: Committed) -> None:
        self._groups.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def _forget(self, group: str, partitions: list[tuple[str, int]]) -> None:
        topics = self._groups.get(group)
        if topics is None:
            return
        for topic, partition in partitions:
            parts = topics.get(topic)
            if parts is not None:
                parts.pop(partition, None)
                if not parts:
                    del topics[topic]
        if not topics:
            del self._groups[group]

    def _append(self, records: Sequence[tuple[bytes, bytes | None]]) -> Future[int] | None:
        """Append one batch; the future completes once it is durable (None when the log's
        policy acknowledges before fsync). Raises what ``Log.append`` raises."""
        info = self._log.append(keyed_batch(records, int(time.time() * 1000)))
        if not self._log.config.fsync_before_ack:
            return None
        return self._log.sync_future(info.last_offset + 1)

    def commit(self, group: str, offsets: dict[tuple[str, int], Committed]) -> Future[int] | None:
        """Append offsets: one record per partition in one batch. Returns None when they
        are applied at once (the relaxed fsync policy); else a future completing when the
        batch is durable: the caller then calls :meth:`apply`, so that OffsetFetch never
        shows a commit a crash could still take back (Kafka's pending offset commits).
        Raises ValueError, before appending anything, for a string too long for a record
        (the caller validates first: see the module docstring)."""
        now = int(time.time() * 1000)
        records = [
            (encode_key(group, topic, partition), encode_value(offset, metadata, now))
            for (topic, partition), (offset, metadata) in offsets.items()
        ]
        fut = self._append(records)
        if fut is None:
            self.apply(group, offsets)
        return fut

    def apply(self, group: str, offsets: dict[tuple[str, int], Committed]) -> None:
        """Make durable commits visible (in the order their batches became durable)."""
        for (topic, partition), value in offsets.items():
            self._set(group, topic, partition, value)

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]]) -> Future[int] | None:
        """Drop ``group``'s committed offsets of these partitions (tombstones)."""
        fut = self._append([(encode_key(group, t, p), None) for t, p in partitions])
        self._forget(group, partitions)
        return fut

    def delete_group(self, group: str) -> bool:
        """Drop every committed offset of ``group`` (DeleteGroups); False if it had none."""
        keys = [(t, p) for t, parts in self._groups.get(group, {}).items() for p in parts]
        if not keys:
            return False
        self.delete_offsets(group, keys)
        return True

    # -- transactional offsets (TxnOffsetCommit, KIP-98) ----------------------------------

    def commit_pending(
        self, producer_id: int, group: str, offsets: dict[tuple[str, int], Committed]
    ) -> Future[int] | None:
        """Append transactional offsets of ``producer_id``'s ongoing transaction, one
        record per partition under seglog's :data:`PENDING_TXN_KEY_VERSION` key: they are
        kept aside (never visible to OffsetFetch) until :meth:`complete_txn`. Returns a
        future completing once they are durable (None under the relaxed policy). Raises
        ValueError before appending for a string too long for a record."""
        now = int(time.time() * 1000)
        records = [
            (_pending_key(producer_id, group, t, p), encode_value(offset, metadata, now))
            for (t, p), (offset, metadata) in offsets.items()
        ]
        fut = self._append(records)
        pending = self._pending.setdefault(producer_id, {})
        for (t, p), value in offsets.items():
            pending[(group, t, p)] = value
        return fut

    def pending_producers(self) -> list[int]:
        """Producer ids with transactional offsets not yet committed or aborted."""
        return list(self._pending)

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Whether a transaction holds an offset of that partition for ``group``
        (OffsetFetch with require_stable answers 88 UNSTABLE_OFFSET_COMMIT)."""
        return any((group, topic, partition) in offsets for offsets in self._pending.values())

    def complete_txn(
        self, producer_id: int, commit: bool
    ) -> tuple[Future[int] | None, dict[str, dict[tuple[str, int], Committed]]]:
        """End ``producer_id``'s transactional offsets: one batch holding, on commit, their
        OffsetCommit records, and tombstones of their pending keys (so the commit and the
        removal are durable together). Returns (the future of the batch's fsync or None,
        group -> offsets to :meth:`apply` once durable; empty on abort or when the producer
        has none). Raises what ``Log.append`` raises."""
        pending = self._pending.pop(producer_id, None)
        if not pending:
            return None, {}
        now = int(time.time() * 1000)
        records: list[tuple[bytes, bytes | None]] = []
        by_group: dict[str, dict[tuple[str, int], Committed]] = {}
        for (group, topic, partition), (offset, metadata) in pending.items():
            if commit:
                records.append(
                    (encode_key(group, topic, partition), encode_value(offset, metadata, now))
                )
                by_group.setdefault(group, {})[(topic, partition)] = (offset, metadata)
            records.append((_pending_key(producer_id, group, topic, partition), None))
        return self._append(records), by_group

    def group_snapshots(self) -> dict[str, bytes]:
        """Consumer group id -> its latest snapshot (the JSON bytes) as replayed on start."""
        return dict(self._snapshots)

    def write_group_snapshot(self, group: str, snapshot: bytes | None) -> Future[int] | None:
        """Append a consumer group's snapshot (None: a tombstone, the group is deleted).
        Returns a future completing once it is durable (None under the relaxed fsync
        policy). Raises ValueError for a group id too long for a record, and what
        ``Log.append`` raises."""
        value = None if snapshot is None else _I16.pack(_SNAPSHOT_VALUE_VERSION) + snapshot
        return self._append([(_snapshot_key(group), value)])

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's commits in every group."""
        for group in list(self._groups):
            parts = self._groups[group].get(topic)
            if parts:
                self.delete_offsets(group, [(topic, p) for p in list(parts)])
