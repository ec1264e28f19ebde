"""Framing and headers of the Kafka wire protocol.

A request frame is ``size:int32`` (:data:`FRAME_SIZE`) then the request header, then the
body (Kafka's ``RequestHeader`` v1, or v2 with tagged fields when the request version is
flexible); a response frame is ``size:int32``, ``correlation_id:int32`` (plus a tagged-field
section for flexible versions, except ApiVersions whose response header is always v0:
:func:`response_header_flexible`), then the body. The broker's connections
(``network.connection``) and the blocking client (``protocol.client``) share these. Bodies
are decoded and encoded with kafka-python's generic schema classes (``kafka.protocol``,
Kafka's JSON message schemas); headers are parsed here from a memoryview because
``decode(header=True)`` copies the payload. Whether a request header
is flexible (v2) depends on the API and version: the caller says, from its table of
request schemas (``seglog.broker.apis.registry``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from seglog.broker.protocol.api_keys import ApiKey
from seglog.broker.protocol.reader import WireReader
from seglog.errors import ProtocolError

__all__ = [
    "FRAME_SIZE",
    "FlexibleRequest",
    "RequestHeader",
    "encode_response",
    "parse_request_header",
    "parse_response_header",
    "response_header_flexible",
]

FRAME_SIZE = struct.Struct(">i")
"""The int32 before every request and response frame: the bytes that follow it."""


_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


class RequestHeader(NamedTuple):
    """Kafka ``RequestHeader`` v1/v2; ``body_offset`` is where the body starts in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


FlexibleRequest = Callable[[int, int], bool]
"""``(api_key, api_version) -> bool``: whether that request uses flexible versions (a v2
request header with tagged fields)."""


def parse_request_header(frame: memoryview, flexible: FlexibleRequest) -> RequestHeader:
    """Parse the request header at the start of ``frame`` (the payload after the size).

    Raises ``ProtocolError`` when the frame is too short or the client id is malformed."""
    if len(frame) < _HEADER.size:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise ProtocolError("truncated client id in request header")
        try:
            client_id = bytes(frame[pos : pos + client_len]).decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError("client id is not UTF-8") from exc
        pos += client_len
    elif client_len != -1:
        raise ProtocolError(f"bad client id length {client_len}")
    if flexible(api_key, api_version):
        reader = WireReader(frame, pos, True, "request header")
        reader.tagged_fields()
        pos = reader.pos
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_response(body: Any, correlation_id: int) -> bytearray:
    """Frame ``body`` (a versioned kafka-python response instance: it carries its API key
    and version) for the wire in one buffer: size, response header (v1 for flexible
    versions; ApiVersions' class forces v0), body. Encoding without ``version=`` avoids
    kafka-python's response-header bug."""
    body.with_header(correlation_id=correlation_id)
    encoded: bytearray = body.encode(header=True, framed=True)
    return encoded


def response_header_flexible(api_key: int, flexible_body: bool) -> bool:
    """Whether a response carries ``ResponseHeader`` v1 (tagged fields after the correlation
    id): when its version is flexible (``flexible_body``), except ApiVersions, whose
    response header is v0 at every version so that a client reads it whatever it asked."""
    return flexible_body and api_key != ApiKey.API_VERSIONS


def parse_response_header(frame: memoryview, flexible: bool) -> tuple[int, int]:
    """``(correlation_id, body_offset)`` of a response ``frame`` (the payload after the
    size); ``flexible``: a v1 header (:func:`response_header_flexible`).

    Raises ``ProtocolError`` when the frame is shorter than its header."""
    reader = WireReader(frame, 0, flexible, "response header")
    correlation_id = reader.int32()
    if flexible:
        reader.tagged_fields()
    return correlation_id, reader.pos
