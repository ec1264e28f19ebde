"""KIP-932 share-group messages (Kafka 4.1+), from this package's JSON schemas.

Served versions: ShareGroupHeartbeat (76) v1, ShareGroupDescribe (77) v1, ShareFetch (78)
v1, ShareAcknowledge (79) v1 (v0 was Kafka 4.0's early access, removed in 4.1; v1 is what
librdkafka 2.16 sends), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92) v0. All versions are flexible. Each class is kafka-python's
``ApiMessage``: ``ShareFetchRequest[1](...)``, ``ShareFetchRequest.decode(data,
version=1)``; nested structures are attributes named after their JSON type, e.g.
``ShareFetchResponse.ShareFetchableTopicResponse.PartitionData.AcquiredRecords``.

The classes are made with ``types.new_class`` (kafka-python's ``ApiMessage`` is untyped,
so a ``class X(ApiMessage, load_json=SCHEMAS)`` statement does not pass mypy --strict);
that is the same class statement, typed ``Any`` like kafka-python's own classes.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

from seglog.broker.protocol.messages import SCHEMAS

with warnings.catch_warnings():  # kafka-python's first import warns (importlib.resources)
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_message import ApiMessage

__all__ = [
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsResponse",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsResponse",
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
]


def _message(name: str) -> Any:
    """kafka-python's message class ``name``, built from ``<name>.json`` here."""

    def namespace(ns: dict[str, Any]) -> None:
        ns["__module__"] = __name__
        ns["__qualname__"] = name

    return types.new_class(name, (ApiMessage,), {"load_json": SCHEMAS}, namespace)


ShareGroupHeartbeatRequest: Any = _message("ShareGroupHeartbeatRequest")
ShareGroupHeartbeatResponse: Any = _message("ShareGroupHeartbeatResponse")
ShareGroupDescribeRequest: Any = _message("ShareGroupDescribeRequest")
ShareGroupDescribeResponse: Any = _message("ShareGroupDescribeResponse")
ShareFetchRequest: Any = _message("ShareFetchRequest")
ShareFetchResponse: Any = _message("ShareFetchResponse")
ShareAcknowledgeRequest: Any = _message("ShareAcknowledgeRequest")
ShareAcknowledgeResponse: Any = _message("ShareAcknowledgeResponse")
DescribeShareGroupOffsetsRequest: Any = _message("DescribeShareGroupOffsetsRequest")
DescribeShareGroupOffsetsResponse: Any = _message("DescribeShareGroupOffsetsResponse")
AlterShareGroupOffsetsRequest: Any = _message("AlterShareGroupOffsetsRequest")
AlterShareGroupOffsetsResponse: Any = _message("AlterShareGroupOffsetsResponse")
DeleteShareGroupOffsetsRequest: Any = _message("DeleteShareGroupOffsetsRequest")
DeleteShareGroupOffsetsResponse: Any = _message("DeleteShareGroupOffsetsResponse")
