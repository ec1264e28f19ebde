"""Message schemas kafka-python does not ship yet, in Kafka's JSON message-schema format.

kafka-python (the broker's codec) builds its request and response classes from Kafka's
JSON message schemas; for APIs newer than its bundled set (KIP-848's
ConsumerGroupHeartbeat, KIP-932's share-group APIs...) this package holds schema files of
our own in the same format, one ``<Name>.json`` per message, written from the protocol's
specification (Kafka's protocol guide and the KIPs): apiKey, type, name, validVersions,
flexibleVersions and the fields with their types, versions, defaults and tagged fields.
The wire format is the interface, so the fields are Kafka's; nothing is hand-encoded.

A module of this package declares the classes, e.g.::

    from kafka.protocol.api_message import ApiMessage

    class ConsumerGroupDescribeRequest(ApiMessage, load_json=SCHEMAS): ...

with ``SCHEMAS = "seglog.broker.protocol.messages"`` (:data:`SCHEMAS`): kafka-python
reads ``ConsumerGroupDescribeRequest.json`` from here and the class encodes, decodes and
versions exactly like its own (``Class[version](...)``, ``.decode(data, version=...)``).
"""

from __future__ import annotations

__all__ = ["SCHEMAS"]

SCHEMAS = __name__
"""The package kafka-python's ``load_json`` reads this package's schema files from."""
