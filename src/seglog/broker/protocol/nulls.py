"""Null where Kafka's schema does not allow it: rejected after decoding.

kafka-python's decoder reads a length of -1 as None for every array, string and bytes
field, nullable in the schema or not; a handler would then fail on ``None`` with a
traceback. :func:`reject_nulls` walks the decoded request with the same schema (Kafka's
JSON message schemas, as kafka-python loaded them) and raises ``ProtocolError`` for a
null in a field that is not nullable at that version: the connection is closed as for any
malformed request, with one log line, and nothing else is touched.
"""

from __future__ import annotations

from typing import Any

from seglog.errors import ProtocolError

__all__ = ["reject_nulls"]

_NULLABLE_KINDS = ("string", "bytes", "records")


def _walk(obj: Any, fields: dict[str, Any], version: int, path: str) -> None:
    for name, field in fields.items():
        if not field.for_version_q(version) or field.tag is not None:
            continue  # absent at this version, or a tagged field (optional: None when absent)
        value = getattr(obj, name, None)
        if value is None:
            if field.nullable_for_version_q(version):
                continue
            if field.is_array() or field.is_struct() or field.type_str in _NULLABLE_KINDS:
                raise ProtocolError(f"null {path}{field.name}, not nullable in v{version}")
            continue
        if field.is_struct_array():
            for i, element in enumerate(value):
                _walk(element, field.fields, version, f"{path}{field.name}[{i}].")
        elif field.is_struct():
            _walk(value, field.fields, version, f"{path}{field.name}.")


def reject_nulls(request: Any, version: int) -> None:
    """Raise ProtocolError if ``request`` (a decoded kafka-python request of ``version``)
    holds a null where its schema forbids one."""
    _walk(request, request._struct.fields, version, "")
