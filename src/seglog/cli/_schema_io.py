"""Avro values for ``seglog produce`` / ``seglog consume`` (``--value-format avro``).

Both talk to a Confluent Schema Registry REST endpoint: ``--schema-registry-url``, else the
broker's own registry (its ``schema.registry.listen`` config, read through DescribeConfigs:
``seglog serve --schema-registry-listen HOST:PORT``). They use confluent-kafka's
serializers unchanged: ``produce`` reads JSON lines, registers ``--value-schema FILE`` under
``<topic>-value`` (TopicNameStrategy, ``auto.register.schemas``) and writes Confluent-framed
Avro; ``consume`` decodes each value by the schema id it carries and prints it as JSON
(``timestamp``/``date`` logical types as ISO 8601 text, ``bytes`` as base64 text, decimals
as strings).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from seglog.columnar import discover_registry

__all__ = ["AvroValues", "to_json_text"]


def _plain(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def to_json_text(value: Any) -> str:
    """A decoded Avro value as one line of JSON."""
    return json.dumps(value, default=_plain, ensure_ascii=False)


class AvroValues:
    """Serializer and deserializer of one topic's values against a registry.

    registry_url: the endpoint, or None for the broker's own (found with ``kafka``, a
    librdkafka configuration). Raises ValueError when none is given and the broker serves
    no registry; OSError when the schema file cannot be read."""

    def __init__(self, topic: str, registry_url: str | None, kafka: dict[str, Any]) -> None:
        url = registry_url or discover_registry(
            {k: str(v) for k, v in kafka.items() if k != "log_level" and not callable(v)}
        )
        if url is None:
            raise ValueError(
                "the broker serves no schema registry: pass --schema-registry-url "
                "(or start it with seglog serve --schema-registry-listen HOST:PORT)"
            )
        self.url = url
        self.client = SchemaRegistryClient({"url": url})
        self.context = SerializationContext(topic, MessageField.VALUE)
        self._serializer: AvroSerializer | None = None
        self._deserializer = AvroDeserializer(self.client)

    def use_schema(self, path: Path) -> None:
        """Serialize with the Avro schema in ``path`` (registered on the first record)."""
        self._serializer = AvroSerializer(
            self.client, path.read_text(), conf={"auto.register.schemas": True}
        )

    def encode(self, value: Any) -> bytes:
        """A JSON-decoded value as Confluent-framed Avro (registers the schema once)."""
        assert self._serializer is not None
        return bytes(self._serializer(value, self.context))

    @staticmethod
    def json_text(value: Any) -> str:
        """``to_json_text``."""
        return to_json_text(value)

    def decode(self, data: bytes) -> Any:
        """The value of a Confluent-framed Avro payload (its writer schema by id)."""
        return self._deserializer(data, self.context)
