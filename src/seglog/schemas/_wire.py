"""Confluent's wire format of a serialized key or value: magic byte 0, the schema id as a
4-byte big-endian integer, then the payload (Avro binary, JSON text, or Protobuf message
indexes then the message)."""

from __future__ import annotations

__all__ = ["MAGIC", "frame_schema_id", "schema_id_of"]

MAGIC = 0
"""The first byte of a Confluent-framed value."""


def schema_id_of(data: bytes | bytearray | memoryview) -> int | None:
    """The schema id a framed value carries (None: not in Confluent's wire format)."""
    if len(data) < 5 or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:5], "big")


def frame_schema_id(schema_id: int, payload: bytes) -> bytes:
    """``payload`` framed with ``schema_id`` (magic 0, id big-endian)."""
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big") + payload
