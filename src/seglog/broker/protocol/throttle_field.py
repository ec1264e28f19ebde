"""Where ``throttle_time_ms`` sits in the responses the broker frames itself (Produce and
Fetch, registered ``encoded``), so a throttle decided after the handler ran (the
request-time quota, KIP-124) still reaches the client in the field, as Kafka reports the
larger of a request's byte-rate and request-time throttles.

Produce v3-12: the body's last field (before the body's tagged fields from v9, the first
flexible version). Fetch v1+: the body's first field, after the response header (size,
correlation id, and a tagged-fields byte from v12).
"""

from __future__ import annotations

import struct

from seglog.broker.protocol.api_keys import ApiKey

__all__ = ["raise_throttle"]

_I32 = struct.Struct(">i")
_PRODUCE_FLEXIBLE, _FETCH_FLEXIBLE = 9, 12


def _offset(api_key: int, version: int, size: int) -> int | None:
    if api_key == ApiKey.PRODUCE:
        return size - (5 if version >= _PRODUCE_FLEXIBLE else 4)
    if api_key == ApiKey.FETCH:
        return 9 if version >= _FETCH_FLEXIBLE else 8
    return None


def raise_throttle(api_key: int, version: int, frame: bytearray, throttle_ms: int) -> None:
    """Raise the ``throttle_time_ms`` of an encoded Produce or Fetch response ``frame``
    (whole, or its first piece for Fetch: the field comes before any records) to
    ``throttle_ms`` in place. Other APIs: nothing."""
    at = _offset(api_key, version, len(frame))
    if at is None or at < 0 or at + 4 > len(frame):
        return
    (current,) = _I32.unpack_from(frame, at)
    if throttle_ms > current:
        _I32.pack_into(frame, at, throttle_ms)
