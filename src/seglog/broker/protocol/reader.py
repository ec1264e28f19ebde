"""The broker's one bounded reader of Kafka wire fields, and its unsigned varint encoder.

Every read is checked against the end of the buffer before anything is taken from it, and
every problem is a ``ProtocolError`` (the connection is then closed): a length or count
is never trusted to allocate. Used by the request header parser (``protocol.framing``), the
array-count walk run before kafka-python decodes a request (``protocol.bounds``), the Produce
parser (``protocol.produce_wire``), and for bytes that are not requests: the records of
``__consumer_offsets`` (``coordinator.committed``) and the consumer-protocol subscriptions in
JoinGroup metadata (``apis.group_admin``), whose callers turn the error into their own outcome.

Varints here are Kafka's protocol ones (compact lengths, tagged fields): *unsigned*, at
most 5 bytes (an int32), not the zigzag varints of record batches (those, one at a time,
are kafka-python's ``kafka.record.util``; many at once, ``seglog.storage``'s numpy code).
kafka-python's unsigned encoder, ``kafka.protocol...codecs.UnsignedVarInt32.encode``, gives
the same bytes but took 470-1350 ns against 260-630 ns for :func:`uvarint_bytes` (timeit,
this machine, 1- to 5-byte values), and the Produce response encoder calls it three times
per topic on a path measured at ~3 us per response: hence the few lines here.
"""

from __future__ import annotations

import struct

from seglog.errors import ProtocolError

__all__ = ["WireReader", "uvarint_bytes"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def uvarint_bytes(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint (Kafka's compact lengths and tags)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class WireReader:
    """Reads fields of ``data`` from ``pos``; ``flexible``: compact (varint) lengths and
    tagged fields, as in a flexible version of a request. ``what`` names the buffer in
    error messages ("request", "produce request", ...)."""

    __slots__ = ("data", "end", "flexible", "pos", "what")

    def __init__(self, data: memoryview, pos: int, flexible: bool, what: str = "request") -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)
        self.flexible = flexible
        self.what = what

    def need(self, n: int) -> int:
        """Take ``n`` bytes: their position. ProtocolError when fewer are left."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise ProtocolError(f"{self.what} truncated: {n} bytes wanted at byte {pos}")
        self.pos = pos + n
        return pos

    def int16(self) -> int:
        """A big-endian int16."""
        return int(_I16.unpack_from(self.data, self.need(2))[0])

    def int32(self) -> int:
        """A big-endian int32."""
        return int(_I32.unpack_from(self.data, self.need(4))[0])

    def int64(self) -> int:
        """A big-endian int64."""
        return int(_I64.unpack_from(self.data, self.need(8))[0])

    def uvarint(self) -> int:
        """An unsigned varint of at most 5 bytes."""
        data, pos, end = self.data, self.pos, self.end
        value = shift = 0
        while True:
            if pos >= end or shift > 28:
                raise ProtocolError(f"truncated or overlong varint in {self.what}")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7

    def length(self, wide: bool) -> int:
        """A string/bytes/array length, -1 for null: a compact length when flexible, else
        an int32 (``wide``: bytes, arrays) or an int16 (strings)."""
        if self.flexible:
            return self.uvarint() - 1
        if wide:  # inlined, not self.int32(): the Produce parser's hot path
            return int(_I32.unpack_from(self.data, self.need(4))[0])
        return int(_I16.unpack_from(self.data, self.need(2))[0])

    def count(self, min_element: int, nullable: bool = True) -> int:
        """An array count (0 for a null array; ProtocolError for one unless ``nullable``),
        checked against the bytes left when each element takes at least ``min_element``
        bytes."""
        n = self.length(wide=True)
        if n < 0:
            if not nullable:
                raise ProtocolError(f"null array in the {self.what}")
            return 0
        if n * min_element > self.end - self.pos:
            raise ProtocolError(f"array of {n} elements cannot fit in the {self.what}")
        return n

    def string(self) -> str | None:
        """A nullable UTF-8 string."""
        n = self.length(wide=False)
        if n < 0:
            return None
        pos = self.need(n)
        try:
            return str(self.data[pos : pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string in {self.what} is not UTF-8") from exc

    def skip_bytes(self) -> None:
        """Skip a nullable bytes field."""
        n = self.length(wide=True)
        if n > 0:
            self.need(n)

    def tagged_fields(self) -> None:
        """Skip a tagged-field section: a plain uvarint count (not a compact length), then
        per field a tag and a uvarint size (each at least one byte)."""
        count = self.uvarint()
        if 2 * count > self.end - self.pos:
            raise ProtocolError(f"{count} tagged fields cannot fit in the {self.what}")
        for _ in range(count):
            self.uvarint()  # tag
            self.need(self.uvarint())
