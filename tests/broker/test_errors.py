"""The broker's one table from seglog's exceptions to Kafka error codes (kafka.errors)."""

from __future__ import annotations

import kafka.errors as ke
import pytest

import seglog.errors as se
from seglog.broker.protocol import errors as _errors
from seglog.spark._reader import DataLossError  # still importable where it was
from seglog.storage import SnapshotError


@pytest.mark.parametrize(
    ("exc", "kafka_error"),
    [
        (se.CorruptRecordError("x"), ke.CorruptRecordError),
        (se.InvalidRecordError("x"), ke.InvalidRecordError),
        (se.RecordTooLargeError("x"), ke.MessageSizeTooLargeError),
        (se.InvalidOffsetError("x"), ke.OffsetOutOfRangeError),
        (se.NotFoundError("x"), ke.OffsetOutOfRangeError),
        (se.DirectoryNotFoundError("x"), ke.KafkaStorageError),
        (se.LogClosedError("x"), ke.KafkaStorageError),
        (se.InvalidTopicError("x"), ke.InvalidTopicError),
        (se.TopicExistsError("x"), ke.TopicAlreadyExistsError),
        (se.UnknownTopicError("x"), ke.UnknownTopicOrPartitionError),
        (_errors.TopicAuthorizationError("x"), ke.TopicAuthorizationFailedError),
        (se.NoIndexError("x"), ke.UnknownError),
        (se.DataLossError("x"), ke.UnknownError),
        (ValueError("x"), ke.InvalidConfigurationError),
        (OSError("x"), ke.KafkaStorageError),
        (RuntimeError("x"), ke.UnknownError),
    ],
)
def test_error_code(exc: BaseException, kafka_error: type[ke.BrokerResponseError]) -> None:
    assert _errors.error_code(exc) == kafka_error.errno


def test_exceptions_carry_no_wire_codes() -> None:
    for name in se.__all__:
        assert not hasattr(getattr(se, name), "kafka_code"), name


def test_one_error_root() -> None:
    assert DataLossError is se.DataLossError
    assert issubclass(DataLossError, se.SeglogError)
    assert issubclass(DataLossError, RuntimeError)
    # a missing directory is no missing record: its own error, a FileNotFoundError too
    assert issubclass(se.DirectoryNotFoundError, se.StorageError)
    assert issubclass(se.DirectoryNotFoundError, FileNotFoundError)
    assert not issubclass(se.DirectoryNotFoundError, se.NotFoundError)
    assert issubclass(SnapshotError, se.StorageError)


def test_codes_are_kafkas() -> None:
    assert _errors.UNSUPPORTED_ENDPOINT_TYPE == 115  # was 119 (INVALID_REGISTRATION)
    assert _errors.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert _errors.NONE == 0
