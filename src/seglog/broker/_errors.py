"""Kafka protocol error codes the broker answers with, and the one table mapping seglog's
exceptions to them.

Codes are Kafka's (``org.apache.kafka.common.protocol.Errors``). Every ``SeglogError``
names its own code in ``kafka_code``; :func:`error_code` is the single place the broker
turns an exception into a code, so a handler never hard-codes a storage error's number.
"""

from __future__ import annotations

from seglog.errors import SeglogError

__all__ = [
    "COORDINATOR_NOT_AVAILABLE",
    "CORRUPT_MESSAGE",
    "DUPLICATE_SEQUENCE_NUMBER",
    "INVALID_CONFIG",
    "INVALID_PARTITIONS",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_RECORD",
    "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT",
    "INVALID_REQUEST",
    "INVALID_REQUIRED_ACKS",
    "INVALID_TOPIC_EXCEPTION",
    "KAFKA_STORAGE_ERROR",
    "MESSAGE_TOO_LARGE",
    "NONE",
    "OFFSET_OUT_OF_RANGE",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "TOPIC_ALREADY_EXISTS",
    "UNKNOWN_SERVER_ERROR",
    "UNKNOWN_TOPIC_ID",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNSUPPORTED_VERSION",
    "error_code",
]

UNKNOWN_SERVER_ERROR = -1
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_CONFIG = 40
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56
INVALID_RECORD = 87
UNKNOWN_TOPIC_ID = 100


def error_code(exc: BaseException) -> int:
    """Kafka error code for ``exc``: its ``kafka_code`` for a :class:`SeglogError`,
    40 INVALID_CONFIG for a ``ValueError`` (bad topic config), 56 KAFKA_STORAGE_ERROR for
    an ``OSError`` (disk trouble), else -1 UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, SeglogError):
        return exc.kafka_code
    if isinstance(exc, ValueError):
        return INVALID_CONFIG
    if isinstance(exc, OSError):
        return KAFKA_STORAGE_ERROR
    return UNKNOWN_SERVER_ERROR
