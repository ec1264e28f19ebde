"""``seglog.iceberg.mode=value_schema`` through a real broker serving its schema registry:
confluent-kafka's AvroSerializer produces (Confluent's wire format: magic 0, the schema
id, the Avro payload), the broker commits the decoded values as columns (the ``seglog``
struct holds partition, offset, timestamp, headers and key), a newer compatible schema
adds its column, and values that do not decode go to ``seglog.<topic>~dlq`` with the
reason."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from tests._wait import wait_until
from tests.broker._registry import start_with_registry
from tests.iceberg import _table

from seglog.broker import BrokerProcess

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

FLIGHT = {
    "type": "record",
    "name": "Flight",
    "namespace": "seglog.test",
    "fields": [
        {"name": "carrier", "type": "string"},
        {"name": "dep_delay", "type": ["null", "int"], "default": None},
        {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "legs", "type": {"type": "array", "items": "string"}},
    ],
}
FLIGHT_V2 = {
    **FLIGHT,
    "fields": [*FLIGHT["fields"], {"name": "seats", "type": "int", "default": 0}],
}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    proc, url = start_with_registry(tmp_path_factory.mktemp("iceberg") / "data")
    try:
        yield proc, url
    finally:
        assert proc.stop(signal.SIGTERM) == 0, proc.log_text()
        assert "Traceback" not in proc.log_text(), proc.log_text()


def test_value_schema_columns_evolution_and_dead_letters(
    running: tuple[BrokerProcess, str], topic: str
) -> None:
    proc, url = running
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    configs = {"seglog.iceberg.mode": "value_schema", "seglog.iceberg.lag.ms": "300"}
    admin.create_topics([NewTopic(topic, 1, config=configs)])[topic].result(30)
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(FLIGHT))
    v2 = AvroSerializer(client, json.dumps(FLIGHT_V2))
    when = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5})
    values: list[bytes | None] = []
    for i in range(6):
        record = {"carrier": "UA", "dep_delay": None if i % 2 else i, "when": when + i,
                  "legs": ["SFO", "JFK"][: i % 3]}  # fmt: skip
        values.append(v1(record, ctx))
    values.append(b"not framed")  # offset 6: no magic byte and id
    values.append(bytes([0, 0, 0, 0x7F, 0x7F]) + b"x")  # offset 7: an unknown id
    values.append(values[0][:5] + b"\xff")  # offset 8: the id of v1, a truncated payload
    values.append(None)  # offset 9: a tombstone
    values.append(v2({"carrier": "LH", "dep_delay": 3, "when": when, "legs": [],
                      "seats": 180}, ctx))  # fmt: skip
    for i, value in enumerate(values):
        producer.produce(topic, value, key=f"k{i}".encode(), headers=[("h", b"%d" % i)])
    assert producer.flush(30) == 0

    data = proc.data_dir
    rows = wait_until(
        lambda: (t := _table.rows_by(data, topic, "seglog")) is not None and len(t) == 7 and t,
        timeout=60, interval=0.2, message="value rows",
    )  # fmt: skip
    assert [r["seglog"]["offset"] for r in rows] == [0, 1, 2, 3, 4, 5, 10]
    assert [r["carrier"] for r in rows] == ["UA"] * 6 + ["LH"]
    assert [r["dep_delay"] for r in rows] == [0, None, 2, None, 4, None, 3]
    assert [r["legs"] for r in rows[:3]] == [[], ["SFO"], ["SFO", "JFK"]]
    assert int(rows[1]["when"].timestamp() * 1000) == when + 1
    assert [r["seats"] for r in rows] == [None] * 6 + [180]  # the column v2 added
    assert rows[2]["seglog"]["key"] == b"k2"
    assert rows[2]["seglog"]["headers"] == [{"key": "h", "value": b"2"}]
    assert rows[2]["seglog"]["partition"] == 0

    dead = wait_until(lambda: len(d := _table.dlq_rows(data, topic)) == 4 and d, timeout=60,
                      interval=0.2, message="dead letters")  # fmt: skip
    assert [r["offset"] for r in dead] == [6, 7, 8, 9]
    assert [r["value"] for r in dead] == values[6:10]
    assert [r["key"] for r in dead] == [b"k6", b"k7", b"k8", b"k9"]
    reasons = [str(r["reason"]) for r in dead]
    assert "wire format" in reasons[0]
    assert "schema id 32639 is not registered" in reasons[1]
    assert "does not decode with schema id" in reasons[2]
    assert "wire format" in reasons[3]
    summary = _table.summary(data, topic)
    assert summary["seglog.offsets.0"] == "11"
