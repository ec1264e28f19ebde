"""Typed logs: a Log whose keys and values go through codecs (klevdb's ``typed`` log).

A :class:`Codec` turns one Python value into bytes and back; ``None`` keys and values are
never passed to a codec (a None value stays a tombstone). Built in: :data:`BYTES`,
:data:`STR` (UTF-8), :data:`JSON` (``json``, compact separators, UTF-8), :data:`VARINT`
(a signed 64-bit integer as a zigzag varint, protobuf's / Go's ``binary.PutVarint``).
Any object with ``encode``/``decode`` is a codec (structural typing)::

    events = TypedLog(open_log("data/events", create=True, key_index=True), STR, JSON)
    events.publish([TypedMessage(key="user-1", value={"clicks": 3})])
    events.get_by_key("user-1").value        # {"clicks": 3}

Decoding errors raise ``ValueError`` (``json.JSONDecodeError``, ``UnicodeDecodeError``);
other errors are the Log's, documented on each Log method.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from kafka.record.util import decode_varint, encode_varint

from seglog.storage.log.blocking import CancelToken
from seglog.storage.log.log import Log, open_log
from seglog.storage.record.message import Message

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel

__all__ = [
    "BYTES",
    "JSON",
    "STR",
    "VARINT",
    "Codec",
    "TypedLog",
    "TypedMessage",
    "open_typed_log",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class Codec(Protocol[T]):
    """Encodes one key or value to bytes and back."""

    def encode(self, value: T) -> bytes:
        """The bytes stored for ``value``."""
        ...

    def decode(self, data: bytes) -> T:
        """The value of stored ``data`` (ValueError if it does not decode)."""
        ...


class BytesCodec:
    """Bytes unchanged."""

    def encode(self, value: bytes) -> bytes:
        return bytes(value)

    def decode(self, data: bytes) -> bytes:
        return data


class StrCodec:
    """Text in an encoding (UTF-8 by default)."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def encode(self, value: str) -> bytes:
        return value.encode(self.encoding)

    def decode(self, data: bytes) -> str:
        return data.decode(self.encoding)


class JsonCodec:
    """Any JSON-serialisable value, compact UTF-8 JSON."""

    def encode(self, value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


class VarintCodec:
    """A signed 64-bit integer as a zigzag varint (1-10 bytes)."""

    def encode(self, value: int) -> bytes:
        if not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"{value} outside the signed 64-bit range")
        out = bytearray()
        encode_varint(value, out.append)  # kafka-python's zigzag varint (Kafka's encoding)
        return bytes(out)

    def decode(self, data: bytes) -> int:
        try:
            value, end = decode_varint(data, 0)
        except (IndexError, ValueError) as e:
            raise ValueError(f"bad varint of {len(data)} bytes") from e
        if end != len(data):
            raise ValueError(f"bad varint of {len(data)} bytes")
        return int(value)


BYTES = BytesCodec()
STR = StrCodec()
JSON = JsonCodec()
VARINT = VarintCodec()


@dataclass(frozen=True, slots=True)
class TypedMessage(Generic[K, V]):
    """One record of a typed log (as ``Message``, with decoded key and value)."""

    offset: int = -1
    """Offset in the log; -1 before publish."""
    timestamp: int = -1
    """Timestamp in ms since the epoch; -1 = the publish time."""
    key: K | None = None
    """Decoded key, or None."""
    value: V | None = None
    """Decoded value, or None (a tombstone)."""
    headers: Sequence[tuple[str, bytes | None]] = ()
    """Record headers, raw."""


class TypedLog(Generic[K, V]):
    """A :class:`Log` with a key codec and a value codec (the Log stays usable as
    ``.log``; closing the typed log closes it)."""

    def __init__(self, log: Log, key_codec: Codec[K], value_codec: Codec[V]) -> None:
        self.log = log
        self.key_codec = key_codec
        self.value_codec = value_codec

    def _encode(self, m: TypedMessage[K, V]) -> Message:
        return Message(
            offset=m.offset,
            timestamp=m.timestamp,
            key=None if m.key is None else self.key_codec.encode(m.key),
            value=None if m.value is None else self.value_codec.encode(m.value),
            headers=m.headers,
        )

    def _decode(self, m: Message) -> TypedMessage[K, V]:
        return TypedMessage(
            offset=m.offset,
            timestamp=m.timestamp,
            key=None if m.key is None else self.key_codec.decode(m.key),
            value=None if m.value is None else self.value_codec.decode(m.value),
            headers=m.headers,
        )

    def decode_all(self, got: tuple[int, list[Message]]) -> tuple[int, list[TypedMessage[K, V]]]:
        return got[0], [self._decode(m) for m in got[1]]

    def publish(self, messages: Sequence[TypedMessage[K, V]]) -> int:
        """Encode and publish; returns the next offset (``Log.publish``)."""
        return self.log.publish([self._encode(m) for m in messages])

    def consume(
        self,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[TypedMessage[K, V]]]:
        """``Log.consume``, decoded."""
        return self.decode_all(self.log.consume(offset, max_count, isolation_level=isolation_level))

    def consume_blocking(
        self,
        offset: int,
        max_count: int,
        timeout_s: float,
        *,
        cancel: CancelToken | None = None,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[TypedMessage[K, V]]]:
        """``Log.consume_blocking``, decoded."""
        got = self.log.consume_blocking(
            offset, max_count, timeout_s, cancel=cancel, isolation_level=isolation_level
        )
        return self.decode_all(got)

    def consume_by_key(
        self,
        key: K,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[TypedMessage[K, V]]]:
        """``Log.consume_by_key`` with an encoded key, decoded."""
        return self.decode_all(
            self.log.consume_by_key(
                self.key_codec.encode(key), offset, max_count, isolation_level=isolation_level
            )
        )

    def get(
        self, offset: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> TypedMessage[K, V]:
        """``Log.get``, decoded."""
        return self._decode(self.log.get(offset, isolation_level=isolation_level))

    def get_by_key(
        self, key: K, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> TypedMessage[K, V]:
        """``Log.get_by_key`` with an encoded key, decoded."""
        encoded = self.key_codec.encode(key)
        return self._decode(self.log.get_by_key(encoded, isolation_level=isolation_level))

    def offset_by_key(self, key: K, *, isolation_level: IsolationLevel = "read_uncommitted") -> int:
        """``Log.offset_by_key`` with an encoded key."""
        return self.log.offset_by_key(self.key_codec.encode(key), isolation_level=isolation_level)

    def offset_by_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> tuple[int, int]:
        """``Log.offset_by_time``."""
        return self.log.offset_by_time(timestamp_ms, isolation_level=isolation_level)

    def get_by_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> TypedMessage[K, V]:
        """``Log.get_by_time``, decoded."""
        return self._decode(self.log.get_by_time(timestamp_ms, isolation_level=isolation_level))

    def next_offset(self) -> int:
        """``Log.next_offset``."""
        return self.log.next_offset()

    def sync(self) -> int:
        """``Log.sync``."""
        return self.log.sync()

    def close(self) -> None:
        """Close the underlying log."""
        self.log.close()

    def __enter__(self) -> TypedLog[K, V]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_typed_log(
    path: str | os.PathLike[str],
    key_codec: Codec[K],
    value_codec: Codec[V],
    **options: Any,
) -> TypedLog[K, V]:
    """``open_log(path, **options)`` wrapped in a :class:`TypedLog`."""
    return TypedLog(open_log(path, **options), key_codec, value_codec)
