"""The transaction coordinator's state in the internal compacted topic
``__transaction_state`` (Kafka's ``TransactionStateManager``), replayed on start.

One record per change of a transactional id: the key is Kafka's ``TransactionLogKey`` v0
(version int16 = 0, transactional id as an int16-length string), the value Kafka's
``TransactionLogValue`` v0 (version int16 = 0, producer id int64, producer epoch int16,
transaction timeout ms int32, status int8 (:class:`TxnState`), the transaction's
partitions as a nullable int32-count array of (topic string, int32-count array of int32
partition ids), last update timestamp ms int64, start timestamp ms int64); an expired id
gets a tombstone (null value). Kafka's record schemas are not in kafka-python: the fields
are written here and read with the broker's bounded ``WireReader``.

Durability is the broker's policy: under the default (fsync before acknowledging) each
write is awaited until fsynced before the coordinator answers or moves on, so a restart
sees every state a client was told about; compaction keeps the last record per id. A
record that does not decode is skipped with a warning at load (the only writer is this
module; Produce to the topic is refused with 17 INVALID_TOPIC_EXCEPTION).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time

from seglog.broker.coordinator.txn_model import TransactionMetadata, TxnState
from seglog.broker.log.internal_topics import (
    INTERNAL_TOPIC_CONFIGS,
    TRANSACTION_STATE_TOPIC,
    keyed_batch,
)
from seglog.broker.log.topics import TopicManager
from seglog.broker.protocol.reader import WireReader
from seglog.errors import ProtocolError
from seglog.storage import OFFSET_OLDEST, Log

__all__ = ["TransactionStateLog", "decode_txn_key", "decode_txn_value", "encode_txn_key"]

log = logging.getLogger(__name__)

_I8, _I16, _I32, _I64 = (
    struct.Struct(">b"),
    struct.Struct(">h"),
    struct.Struct(">i"),
    struct.Struct(">q"),
)
_KEY_VERSION = _VALUE_VERSION = 0


def _string(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"a string of {len(raw)} bytes does not fit a transaction log record")
    return _I16.pack(len(raw)) + raw


def encode_txn_key(transactional_id: str) -> bytes:
    """Kafka's TransactionLogKey v0. Raises ValueError for an id longer than 32767 bytes."""
    return _I16.pack(_KEY_VERSION) + _string(transactional_id)


def decode_txn_key(data: bytes) -> str:
    """The transactional id of a TransactionLogKey v0. Raises ValueError."""
    r = WireReader(memoryview(data), 0, False, "transaction log key")
    try:
        version = r.int16()
        txn_id = r.string()
    except ProtocolError as exc:
        raise ValueError(f"bad transaction log key: {exc}") from None
    if version != _KEY_VERSION or txn_id is None:
        raise ValueError(f"transaction log key version {version} or null id")
    return txn_id


def encode_txn_value(meta: TransactionMetadata) -> bytes:
    """Kafka's TransactionLogValue v0 of ``meta`` (partitions sorted by topic, partition)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [_I32.pack(len(by_topic))]
    for topic, ids in by_topic.items():
        parts.append(_string(topic) + _I32.pack(len(ids)) + b"".join(_I32.pack(i) for i in ids))
    return b"".join(
        (
            _I16.pack(_VALUE_VERSION),
            _I64.pack(meta.producer_id),
            _I16.pack(meta.producer_epoch),
            _I32.pack(meta.timeout_ms),
            _I8.pack(int(meta.state)),
            *parts,
            _I64.pack(meta.last_update_ms),
            _I64.pack(meta.start_ms),
        )
    )


def decode_txn_value(txn_id: str, data: bytes) -> TransactionMetadata:
    """The metadata of a TransactionLogValue v0 (v1's tagged fields are not read). Raises
    ValueError (a truncated field, another version, an unknown status)."""
    view = memoryview(data)
    r = WireReader(view, 0, False, "transaction log value")
    try:
        version = r.int16()
        if version != _VALUE_VERSION:
            raise ValueError(f"transaction log value version {version}")
        pid, epoch, timeout = r.int64(), r.int16(), r.int32()
        status = _I8.unpack_from(view, r.need(1))[0]
        partitions: set[tuple[str, int]] = set()
        for _ in range(r.count(6)):
            topic = r.string()
            if topic is None:
                raise ValueError("null topic in a transaction log value")
            for _ in range(r.count(4, nullable=False)):
                partitions.add((topic, r.int32()))
        last_update, start = r.int64(), r.int64()
    except ProtocolError as exc:
        raise ValueError(f"bad transaction log value: {exc}") from None
    return TransactionMetadata(
        txn_id, pid, epoch, timeout, TxnState(status), partitions, start, last_update
    )


class TransactionStateLog:
    """transactional id -> :class:`TransactionMetadata` as last written to
    ``__transaction_state`` (created with the first transactional id, as Kafka creates it
    on the first FindCoordinator of type TRANSACTION). Runs on the broker's event loop."""

    def __init__(self, topics: TopicManager) -> None:
        self._topics = topics
        self._log: Log | None = None
        if topics.get(TRANSACTION_STATE_TOPIC) is not None:
            self._log = topics.log(TRANSACTION_STATE_TOPIC, 0)

    def load(self) -> dict[str, TransactionMetadata]:
        """Replay the topic: the last state of every transactional id (tombstoned ones
        left out)."""
        found: dict[str, TransactionMetadata] = {}
        if self._log is None:
            return found
        offset = OFFSET_OLDEST
        while True:
            offset, messages = self._log.consume(offset, 10_000)
            if not messages:
                break
            for m in messages:
                try:
                    if m.key is None:
                        raise ValueError("null key")
                    txn_id = decode_txn_key(m.key)
                    if m.value is None:
                        found.pop(txn_id, None)
                    else:
                        found[txn_id] = decode_txn_value(txn_id, m.value)
                except ValueError as exc:
                    log.warning(
                        "skipping record %d of %s: %s", m.offset, TRANSACTION_STATE_TOPIC, exc
                    )
        if found:
            log.info("loaded %d transactional id(s) from %s", len(found), TRANSACTION_STATE_TOPIC)
        return found

    def _state_log(self) -> Log:
        if self._log is None:
            if self._topics.get(TRANSACTION_STATE_TOPIC) is None:
                self._topics.create(TRANSACTION_STATE_TOPIC, 1, INTERNAL_TOPIC_CONFIGS)
            self._log = self._topics.log(TRANSACTION_STATE_TOPIC, 0)
        return self._log

    async def write(
        self, txn_id: str, meta: TransactionMetadata | None, *, durable: bool = True
    ) -> tuple[Log, int]:
        """Append ``meta`` (None: a tombstone) for ``txn_id`` and return once it is durable
        under the broker's policy (``durable`` False: at once; its fsync is requested at
        once all the same). Returns (the log, the end offset after the record): durable
        once the log's high watermark reaches it. Raises what ``Log.append`` / the fsync
        raise, and ValueError for an id too long for a record."""
        key = encode_txn_key(txn_id)
        value = None if meta is None else encode_txn_value(meta)
        state_log = self._state_log()
        info = state_log.append(keyed_batch([(key, value)], int(time.time() * 1000)))
        if durable and state_log.config.fsync_before_ack:
            await asyncio.wrap_future(state_log.sync_future(info.last_offset + 1))
        return state_log, info.last_offset + 1
