"""KIP-848's consumer-group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
(69), built by kafka-python from this package's JSON schema files (Kafka's fields, see the
package docstring). ``ConsumerGroupHeartbeatRequest[1]`` etc. encode and decode like
kafka-python's own classes."""

from __future__ import annotations

import warnings

from seglog.broker.protocol.messages import SCHEMAS

with warnings.catch_warnings():  # kafka-python's first import warns too
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_message import ApiMessage

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]

# kafka-python reads each schema file with importlib.resources' legacy read_text, which
# warns (DeprecationWarning) as each class is built
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=SCHEMAS):  # type: ignore[misc,call-arg]
        """API 68 v0-1 (v1 adds SubscribedTopicRegex; member ids chosen by the client)."""

    class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=SCHEMAS):  # type: ignore[misc,call-arg]
        """API 68 v0-1."""

    class ConsumerGroupDescribeRequest(ApiMessage, load_json=SCHEMAS):  # type: ignore[misc,call-arg]
        """API 69 v0-1 (v1 is v0: it asks for the response's member type)."""

    class ConsumerGroupDescribeResponse(ApiMessage, load_json=SCHEMAS):  # type: ignore[misc,call-arg]
        """API 69 v0-1 (v1 adds each member's MemberType, KIP-1099)."""
