"""The array-count walk (``protocol.bounds``) agrees with kafka-python's decoder: every version of
every API served, with every array populated, walks to the end without complaint, and a
count larger than the bytes left is refused."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs import Bytes, String
from kafka.protocol.schemas.fields.struct import StructField

from seglog.broker.apis.registry import REGISTRY, flexible_request
from seglog.broker.protocol.bounds import check_array_counts
from seglog.broker.protocol.framing import parse_request_header
from seglog.errors import ProtocolError

CASES = [
    (key, v)
    for key, spec in REGISTRY.items()
    if key != 18  # ApiVersions is answered without decoding its body
    for v in range(spec.min_accepted, spec.max_version + 1)
]


def sample(field: Any, version: int) -> Any:
    """A value for ``field``: arrays hold two elements, strings and bytes are short."""
    if isinstance(field, ArrayField):
        inner = field.array_of
        return [sample(inner, version) for _ in range(2)]
    if isinstance(field, StructField):
        values = {f.name: sample(f, version) for f in field._fields if f.for_version_q(version)}
        return field.data_class(version=version, **values)
    kind = field._type
    if kind is Bytes:
        return b"bytes"
    if isinstance(kind, String):
        return "str"
    if getattr(kind, "size", None) == 16:
        return uuid.uuid4()
    if getattr(kind, "fmt", None) == "?":
        return True
    return 1


@pytest.mark.parametrize(("key", "version"), CASES)
def test_walk_accepts_every_served_request(key: int, version: int) -> None:
    request_class = REGISTRY[key].request
    struct = request_class._struct
    values = {f.name: sample(f, version) for f in struct._fields if f.for_version_q(version)}
    request = request_class[version](**values)
    request.with_header(correlation_id=1, client_id="bounds")
    frame = memoryview(bytes(request.encode(header=True)))
    header = parse_request_header(frame, flexible_request)
    request_class.decode(frame[header.body_offset :], version=version)  # kafka-python agrees
    check_array_counts(request_class, frame, header.body_offset, version, walk_above=0)
    if any(isinstance(v, list) for v in values.values()):
        with pytest.raises(ProtocolError):  # each populated array holds two elements
            check_array_counts(
                request_class, frame, header.body_offset, version, max_elements=1, walk_above=0
            )
