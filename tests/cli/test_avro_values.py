"""``seglog produce --value-format avro --value-schema FILE`` and ``seglog consume
--value-format avro`` against a broker serving its schema registry: JSON lines in, Avro
(Confluent wire format, schema registered under ``<topic>-value``) on the topic, JSON out;
confluent-kafka's AvroDeserializer reads what produce wrote."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from tests.broker._registry import start_with_registry

from .conftest import Seglog

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": ["null", "double"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
DOCS = [
    {"sensor": "s1", "value": 1.5, "at": 1_700_000_000_000},
    {"sensor": "s2", "value": None, "at": 1_700_000_001_000},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(bootstrap, registry URL) of a broker serving its registry."""
    proc, url = start_with_registry(tmp_path_factory.mktemp("avro-cli") / "data")
    try:
        yield proc.bootstrap, url
    finally:
        assert proc.stop(signal.SIGTERM) == 0, proc.log_text()


def test_produce_then_consume_as_json(served: tuple[str, str], tmp_path: Path) -> None:
    bootstrap, url = served
    seglog = Seglog(bootstrap)
    schema = tmp_path / "reading.avsc"
    schema.write_text(json.dumps(SCHEMA))
    lines = b"".join(json.dumps(d).encode() + b"\n" for d in DOCS)
    seglog("produce", "readings", "--value-format", "avro", "--value-schema", str(schema),
           stdin=lines)  # fmt: skip
    client = SchemaRegistryClient({"url": url})
    assert client.get_latest_version("readings-value").version == 1
    # consume: the registry found through the broker (DescribeConfigs), values as JSON
    out = seglog("consume", "readings", "-e", "--value-format", "avro").stdout.decode()
    printed = [json.loads(line) for line in out.splitlines()]
    assert printed == [
        {**DOCS[0], "at": "2023-11-14T22:13:20+00:00"},
        {**DOCS[1], "at": "2023-11-14T22:13:21+00:00"},
    ]
    records = seglog.json_lines("consume", "readings", "-e", "--value-format", "avro")
    assert [r["value"]["sensor"] for r in records] == ["s1", "s2"]
    # what confluent-kafka's own deserializer makes of the topic
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["readings"])
    deserializer = AvroDeserializer(client)
    got: list[Any] = []
    while len(got) < len(DOCS):
        msg = consumer.poll(10)
        assert msg is not None
        assert msg.error() is None
        got.append(deserializer(msg.value(), SerializationContext("readings", MessageField.VALUE)))
    consumer.close()
    assert [(g["sensor"], g["value"]) for g in got] == [(d["sensor"], d["value"]) for d in DOCS]


def test_bad_input_is_a_usage_error(served: tuple[str, str], tmp_path: Path) -> None:
    bootstrap, url = served
    seglog = Seglog(bootstrap)
    schema = tmp_path / "reading.avsc"
    schema.write_text(json.dumps(SCHEMA))
    missing = seglog("produce", "readings2", "--value-format", "avro", stdin=b"{}\n", check=False)
    assert missing.returncode == 2
    assert b"--value-schema" in missing.stderr
    misfit = seglog("produce", "readings2", "--value-format", "avro", "--value-schema",
                    str(schema), "--schema-registry-url", url, stdin=b'{"sensor": 3}\n',
                    check=False)  # fmt: skip
    assert misfit.returncode == 2
    assert b"record 1" in misfit.stderr
    seglog("produce", "raw", stdin=b"not avro\n")
    garbage = seglog("consume", "raw", "-e", "--value-format", "avro", check=False)
    assert garbage.returncode == 1
    assert b"offset 0" in garbage.stderr
