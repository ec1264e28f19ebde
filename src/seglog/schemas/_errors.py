"""The schema registry's errors: Confluent Schema Registry's error codes and HTTP statuses
(``io.confluent.kafka.schemaregistry.rest.exceptions``), one class carrying both.

```
SeglogError
└── RegistryError            any registry refusal: ``status`` (HTTP), ``error_code``
                             (Confluent's: 40401, 42201, 409, ...), ``message``
```
"""

from __future__ import annotations

from seglog.errors import SeglogError

__all__ = [
    "COMPATIBILITY_UNSUPPORTED",
    "ID_CONFLICT",
    "INCOMPATIBLE_SCHEMA",
    "INVALID_COMPATIBILITY_LEVEL",
    "INVALID_MODE",
    "INVALID_SCHEMA",
    "INVALID_SUBJECT",
    "INVALID_VERSION",
    "OPERATION_NOT_PERMITTED",
    "REFERENCE_EXISTS",
    "SCHEMA_NOT_FOUND",
    "STORE_ERROR",
    "SUBJECT_COMPATIBILITY_NOT_CONFIGURED",
    "SUBJECT_MODE_NOT_CONFIGURED",
    "SUBJECT_NOT_FOUND",
    "SUBJECT_NOT_SOFT_DELETED",
    "SUBJECT_SOFT_DELETED",
    "VERSION_NOT_FOUND",
    "VERSION_NOT_SOFT_DELETED",
    "VERSION_SOFT_DELETED",
    "RegistryError",
]

# Confluent's codes: the first three digits are the HTTP status
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_CONFLICT = 42207
INVALID_SUBJECT = 42208
STORE_ERROR = 50001
COMPATIBILITY_UNSUPPORTED = INVALID_COMPATIBILITY_LEVEL
"""A compatibility level whose rules seglog does not implement for a schema's format or
for a construct the schemas use (JSON Schema's ``oneOf``...): refused rather than
answered wrongly, with a message naming the construct."""


class RegistryError(SeglogError):
    """A request the registry refuses: the HTTP status, Confluent's error code and the
    message, answered as ``{"error_code": ..., "message": ...}``."""

    def __init__(self, error_code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status if status is not None else _status(error_code)


def _status(code: int) -> int:
    """Confluent's HTTP status of an error code: its first three digits (409 is itself)."""
    return code if code < 1000 else int(str(code)[:3])
