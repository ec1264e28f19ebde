"""Kafka protocol error codes the broker answers with, and the one table mapping seglog's
exceptions to them.

Every code is kafka-python's (``kafka.errors``: one class per Kafka error, its number in
``errno``, as in ``org.apache.kafka.common.protocol.Errors``); no number is written in the
broker. :data:`EXCEPTION_ERRORS` maps seglog's exceptions (which know nothing of the wire)
to Kafka errors, and :func:`error_code` is the single place the broker turns an exception
into a code, so a handler never hard-codes a storage error's number.
"""

from __future__ import annotations

import kafka.errors as ke

from seglog.errors import (
    BrokerError,
    CorruptRecordError,
    DirectoryNotFoundError,
    InvalidOffsetError,
    InvalidRecordError,
    InvalidTopicError,
    LogClosedError,
    NotFoundError,
    RecordTooLargeError,
    RemoteStorageError,
    SeglogError,
    TopicExistsError,
    UnknownTopicError,
)

__all__ = [
    "CLUSTER_AUTHORIZATION_FAILED",
    "CONCURRENT_TRANSACTIONS",
    "COORDINATOR_NOT_AVAILABLE",
    "CORRUPT_MESSAGE",
    "DUPLICATE_SEQUENCE_NUMBER",
    "ELECTION_NOT_NEEDED",
    "EXCEPTION_ERRORS",
    "FENCED_INSTANCE_ID",
    "FENCED_MEMBER_EPOCH",
    "FETCH_SESSION_ID_NOT_FOUND",
    "GROUP_AUTHORIZATION_FAILED",
    "GROUP_ID_NOT_FOUND",
    "GROUP_MAX_SIZE_REACHED",
    "GROUP_SUBSCRIBED_TO_TOPIC",
    "ILLEGAL_GENERATION",
    "ILLEGAL_SASL_STATE",
    "INCONSISTENT_GROUP_PROTOCOL",
    "INVALID_CONFIG",
    "INVALID_GROUP_ID",
    "INVALID_PARTITIONS",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_PRODUCER_ID_MAPPING",
    "INVALID_RECORD",
    "INVALID_REGULAR_EXPRESSION",
    "INVALID_REPLICATION_FACTOR",
    "INVALID_REPLICA_ASSIGNMENT",
    "INVALID_REQUEST",
    "INVALID_REQUIRED_ACKS",
    "INVALID_SESSION_TIMEOUT",
    "INVALID_TOPIC_EXCEPTION",
    "INVALID_TRANSACTION_TIMEOUT",
    "INVALID_TXN_STATE",
    "KAFKA_STORAGE_ERROR",
    "LOG_DIR_NOT_FOUND",
    "MEMBER_ID_REQUIRED",
    "MESSAGE_TOO_LARGE",
    "NONE",
    "NON_EMPTY_GROUP",
    "NOT_COORDINATOR",
    "NO_REASSIGNMENT_IN_PROGRESS",
    "OFFSET_METADATA_TOO_LARGE",
    "OFFSET_OUT_OF_RANGE",
    "OPERATION_NOT_ATTEMPTED",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "PRODUCER_FENCED",
    "REBALANCE_IN_PROGRESS",
    "RESOURCE_NOT_FOUND",
    "SASL_AUTHENTICATION_FAILED",
    "SECURITY_DISABLED",
    "STALE_MEMBER_EPOCH",
    "THROTTLING_QUOTA_EXCEEDED",
    "TOPIC_ALREADY_EXISTS",
    "TOPIC_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_NOT_FOUND",
    "UNACCEPTABLE_CREDENTIAL",
    "UNKNOWN_MEMBER_ID",
    "UNKNOWN_SERVER_ERROR",
    "UNKNOWN_TOPIC_ID",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNRELEASED_INSTANCE_ID",
    "UNSTABLE_OFFSET_COMMIT",
    "UNSUPPORTED_ASSIGNOR",
    "UNSUPPORTED_ENDPOINT_TYPE",
    "UNSUPPORTED_SASL_MECHANISM",
    "UNSUPPORTED_VERSION",
    "TopicAuthorizationError",
    "error_code",
]

UNKNOWN_SERVER_ERROR: int = ke.UnknownError.errno
NONE: int = ke.NoError.errno
OFFSET_OUT_OF_RANGE: int = ke.OffsetOutOfRangeError.errno
OFFSET_METADATA_TOO_LARGE: int = ke.OffsetMetadataTooLargeError.errno
CORRUPT_MESSAGE: int = ke.CorruptRecordError.errno
UNKNOWN_TOPIC_OR_PARTITION: int = ke.UnknownTopicOrPartitionError.errno
MESSAGE_TOO_LARGE: int = ke.MessageSizeTooLargeError.errno
COORDINATOR_NOT_AVAILABLE: int = ke.CoordinatorNotAvailableError.errno
NOT_COORDINATOR: int = ke.NotCoordinatorError.errno
INVALID_TOPIC_EXCEPTION: int = ke.InvalidTopicError.errno
INVALID_REQUIRED_ACKS: int = ke.InvalidRequiredAcksError.errno
ILLEGAL_GENERATION: int = ke.IllegalGenerationError.errno
INCONSISTENT_GROUP_PROTOCOL: int = ke.InconsistentGroupProtocolError.errno
INVALID_GROUP_ID: int = ke.InvalidGroupIdError.errno
UNKNOWN_MEMBER_ID: int = ke.UnknownMemberIdError.errno
INVALID_SESSION_TIMEOUT: int = ke.InvalidSessionTimeoutError.errno
REBALANCE_IN_PROGRESS: int = ke.RebalanceInProgressError.errno
TOPIC_AUTHORIZATION_FAILED: int = ke.TopicAuthorizationFailedError.errno
GROUP_AUTHORIZATION_FAILED: int = ke.GroupAuthorizationFailedError.errno
CLUSTER_AUTHORIZATION_FAILED: int = ke.ClusterAuthorizationFailedError.errno
UNSUPPORTED_SASL_MECHANISM: int = ke.UnsupportedSaslMechanismError.errno
ILLEGAL_SASL_STATE: int = ke.IllegalSaslStateError.errno
UNSUPPORTED_VERSION: int = ke.UnsupportedVersionError.errno
TOPIC_ALREADY_EXISTS: int = ke.TopicAlreadyExistsError.errno
INVALID_PARTITIONS: int = ke.InvalidPartitionsError.errno
INVALID_REPLICATION_FACTOR: int = ke.InvalidReplicationFactorError.errno
INVALID_REPLICA_ASSIGNMENT: int = ke.InvalidReplicationAssignmentError.errno
INVALID_CONFIG: int = ke.InvalidConfigurationError.errno
INVALID_REQUEST: int = ke.InvalidRequestError.errno
OUT_OF_ORDER_SEQUENCE_NUMBER: int = ke.OutOfOrderSequenceNumberError.errno
DUPLICATE_SEQUENCE_NUMBER: int = ke.DuplicateSequenceNumberError.errno
INVALID_PRODUCER_EPOCH: int = ke.InvalidProducerEpochError.errno
SECURITY_DISABLED: int = ke.SecurityDisabledError.errno
KAFKA_STORAGE_ERROR: int = ke.KafkaStorageError.errno
LOG_DIR_NOT_FOUND: int = ke.LogDirNotFoundError.errno
SASL_AUTHENTICATION_FAILED: int = ke.SaslAuthenticationFailedError.errno
NON_EMPTY_GROUP: int = ke.NonEmptyGroupError.errno
GROUP_ID_NOT_FOUND: int = ke.GroupIdNotFoundError.errno
FETCH_SESSION_ID_NOT_FOUND: int = ke.FetchSessionIdNotFoundError.errno
MEMBER_ID_REQUIRED: int = ke.MemberIdRequiredError.errno
FENCED_INSTANCE_ID: int = ke.FencedInstanceIdError.errno
ELECTION_NOT_NEEDED: int = ke.ElectionNotNeededError.errno
NO_REASSIGNMENT_IN_PROGRESS: int = ke.NoReassignmentInProgressError.errno
GROUP_SUBSCRIBED_TO_TOPIC: int = ke.GroupSubscribedToTopicError.errno
INVALID_RECORD: int = ke.InvalidRecordError.errno
RESOURCE_NOT_FOUND: int = ke.ResourceNotFoundError.errno
UNACCEPTABLE_CREDENTIAL: int = ke.UnacceptableCredentialError.errno
UNKNOWN_TOPIC_ID: int = ke.UnknownTopicIdError.errno
UNSUPPORTED_ENDPOINT_TYPE: int = ke.UnsupportedEndpointTypeError.errno
THROTTLING_QUOTA_EXCEEDED: int = ke.ThrottlingQuotaExceededError.errno
GROUP_MAX_SIZE_REACHED: int = ke.GroupMaxSizeReachedError.errno
FENCED_MEMBER_EPOCH: int = ke.FencedMemberEpochError.errno
UNRELEASED_INSTANCE_ID: int = ke.UnreleasedInstanceIdError.errno
UNSUPPORTED_ASSIGNOR: int = ke.UnsupportedAssignorError.errno
STALE_MEMBER_EPOCH: int = ke.StaleMemberEpochError.errno
INVALID_REGULAR_EXPRESSION: int = 128
"""Kafka's ``Errors.INVALID_REGULAR_EXPRESSION`` (KIP-848: a malformed SubscribedTopicRegex);
kafka-python 3.0 has no class for it, so the number is written here, the one exception."""
# transactions (KIP-98, KIP-588, KIP-664)
INVALID_TXN_STATE: int = ke.InvalidTxnStateError.errno
INVALID_PRODUCER_ID_MAPPING: int = ke.InvalidProducerIdMappingError.errno
INVALID_TRANSACTION_TIMEOUT: int = ke.InvalidTransactionTimeoutError.errno
CONCURRENT_TRANSACTIONS: int = ke.ConcurrentTransactionsError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: int = ke.TransactionalIdAuthorizationFailedError.errno
OPERATION_NOT_ATTEMPTED: int = ke.OperationNotAttemptedError.errno
PRODUCER_FENCED: int = ke.ProducerFencedError.errno
TRANSACTIONAL_ID_NOT_FOUND: int = ke.TransactionalIdNotFoundError.errno
UNSTABLE_OFFSET_COMMIT: int = ke.UnstableOffsetCommitError.errno
# share groups (KIP-932)
INVALID_RECORD_STATE: int = ke.InvalidRecordStateError.errno
SHARE_SESSION_NOT_FOUND: int = ke.ShareSessionNotFoundError.errno
INVALID_SHARE_SESSION_EPOCH: int = ke.InvalidShareSessionEpochError.errno
SHARE_SESSION_LIMIT_REACHED: int = 133  # Kafka 4.1 (kafka-python has no class for it)


class TopicAuthorizationError(BrokerError):
    """The client may not act on the topic (DeleteTopics without DELETE)."""


EXCEPTION_ERRORS: dict[type[SeglogError], type[ke.BrokerResponseError]] = {
    CorruptRecordError: ke.CorruptRecordError,
    InvalidRecordError: ke.InvalidRecordError,
    RecordTooLargeError: ke.MessageSizeTooLargeError,
    InvalidOffsetError: ke.OffsetOutOfRangeError,
    # a vanished log or data directory is disk trouble, not an offset the client may reset
    DirectoryNotFoundError: ke.KafkaStorageError,
    NotFoundError: ke.OffsetOutOfRangeError,
    LogClosedError: ke.KafkaStorageError,
    # tiered storage: the object store failed (retriable: clients retry until it is back)
    RemoteStorageError: ke.KafkaStorageError,
    InvalidTopicError: ke.InvalidTopicError,
    TopicExistsError: ke.TopicAlreadyExistsError,
    UnknownTopicError: ke.UnknownTopicOrPartitionError,
    TopicAuthorizationError: ke.TopicAuthorizationFailedError,
}
"""seglog exception class -> the Kafka error a client gets for it; a class not listed
takes its nearest listed base class's, else UNKNOWN_SERVER_ERROR."""


def error_code(exc: BaseException) -> int:
    """Kafka error code for ``exc``: from :data:`EXCEPTION_ERRORS` (its class or nearest
    listed base class) for a :class:`SeglogError`, 40 INVALID_CONFIG for a ``ValueError``
    (bad topic config), 56 KAFKA_STORAGE_ERROR for an ``OSError`` (disk trouble), else -1
    UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, SeglogError):
        for cls in type(exc).__mro__:
            kafka_error = EXCEPTION_ERRORS.get(cls)
            if kafka_error is not None:
                return int(kafka_error.errno)
        return UNKNOWN_SERVER_ERROR
    if isinstance(exc, ValueError):
        return INVALID_CONFIG
    if isinstance(exc, OSError):
        return KAFKA_STORAGE_ERROR
    return UNKNOWN_SERVER_ERROR
