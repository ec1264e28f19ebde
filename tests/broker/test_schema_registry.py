"""The schema registry of ``seglog serve --schema-registry-listen`` with confluent-kafka's
own clients, unchanged: SchemaRegistryClient, the Avro, JSON Schema and Protobuf
serializers and deserializers through a real producer and consumer; Confluent's error
codes for bad requests (the server stays up, nothing stored changes); validation on
produce; ids across kill -9."""

from __future__ import annotations

import base64
import http.client
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import (
    ConfigCompatibilityLevel,
    Schema,
    SchemaRegistryClient,
    ServerConfig,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tests.broker._registry import rest, start_with_registry
from tests.broker._wire import Wire, make_batch, produce_request

from seglog.broker import BrokerProcess

pytestmark = pytest.mark.broker  # starts seglog serve (through start_with_registry)

FLIGHT = {
    "type": "record",
    "name": "Flight",
    "namespace": "seglog.test",
    "fields": [
        {"name": "carrier", "type": "string"},
        {"name": "dep_delay", "type": ["null", "int"], "default": None},
    ],
}
FLIGHT_V2 = {
    **FLIGHT,
    "fields": [*FLIGHT["fields"], {"name": "seats", "type": "int", "default": 0}],
}


class Running:
    def __init__(self, proc: BrokerProcess, url: str) -> None:
        self.proc, self.url, self.bootstrap = proc, url, proc.bootstrap

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    proc, url = start_with_registry(tmp_path_factory.mktemp("registry") / "data")
    try:
        yield Running(proc, url)
    finally:
        assert proc.stop(signal.SIGTERM) == 0, proc.log_text()
        assert "Traceback" not in proc.log_text(), proc.log_text()


def _consume(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[Any] = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg)
            if len(got) == count:
                break
    finally:
        consumer.close()
    return got


def _round_trip(
    running: Running, topic: str, serializer: Any, deserializer: Any, value: Any
) -> Any:
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": running.bootstrap})
    producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(15) == 0
    (msg,) = _consume(running.bootstrap, topic, 1)
    assert msg.value()[0] == 0  # Confluent's wire format
    return deserializer(msg.value(), ctx)


def test_avro_serializer_round_trip_and_client_calls(registry: Running, topic: str) -> None:
    client = registry.client()
    serializer = AvroSerializer(client, json.dumps(FLIGHT))
    value = {"carrier": "UA", "dep_delay": 12}
    assert _round_trip(registry, topic, serializer, AvroDeserializer(client), value) == value
    subject = f"{topic}-value"
    latest = client.get_latest_version(subject)
    assert latest.version == 1
    assert json.loads(latest.schema.schema_str) == FLIGHT
    # the same schema under another subject: the same global id
    other = registry.client().register_schema(f"{topic}-other", Schema(json.dumps(FLIGHT), "AVRO"))
    assert other == latest.schema_id
    assert client.get_versions(subject) == [1]
    assert subject in client.get_subjects()
    found = client.lookup_schema(subject, Schema(json.dumps(FLIGHT, indent=2), "AVRO"))
    assert (found.schema_id, found.version) == (latest.schema_id, 1)
    # a compatible evolution (BACKWARD, the default), then an incompatible one
    assert client.test_compatibility(subject, Schema(json.dumps(FLIGHT_V2), "AVRO"))
    v2 = client.register_schema(subject, Schema(json.dumps(FLIGHT_V2), "AVRO"))
    assert v2 != latest.schema_id
    bad = {**FLIGHT, "fields": [{"name": "carrier", "type": "int"}]}
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema(subject, Schema(json.dumps(bad), "AVRO"))
    assert (info.value.http_status_code, info.value.error_code) == (409, 409)
    assert client.get_versions(subject) == [1, 2]
    assert sorted(registry.client().get_subjects()) == sorted(
        {subject, f"{topic}-other", *client.get_subjects()}
    )
    status, body = rest("GET", f"{registry.url}/schemas/ids/{v2}/versions")
    assert (status, body) == (200, [{"subject": subject, "version": 2}])


def test_json_schema_serializer_round_trip(registry: Running, topic: str) -> None:
    schema = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Flight",
        "type": "object",
        "properties": {"carrier": {"type": "string"}, "delay": {"type": "integer"}},
        "required": ["carrier"],
    })  # fmt: skip
    client = registry.client()
    serializer = JSONSerializer(schema, client)
    deserializer = JSONDeserializer(schema, schema_registry_client=client)
    value = {"carrier": "AA", "delay": 3}
    assert _round_trip(registry, topic, serializer, deserializer, value) == value
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def _flight_message_class() -> Any:
    """A protobuf message class made at run time from a FileDescriptorProto (what protoc
    would generate): seglog.test.Flight {string carrier = 1; int32 dep_delay = 2;}."""
    fdp = descriptor_pb2.FileDescriptorProto(name="seglog_test_flight.proto", package="seglog.test")
    fdp.syntax = "proto3"
    message = fdp.message_type.add(name="Flight")
    message.field.add(name="carrier", number=1, type=9, label=1)  # string
    message.field.add(name="dep_delay", number=2, type=5, label=1)  # int32
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("seglog.test.Flight"))


def test_protobuf_serializer_round_trip(registry: Running, topic: str) -> None:
    flight = _flight_message_class()
    client = registry.client()
    serializer = ProtobufSerializer(flight, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(flight, {"use.deprecated.format": False})
    value = flight(carrier="DL", dep_delay=-4)
    assert _round_trip(registry, topic, serializer, deserializer, value) == value
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # a .proto text evolution of it, checked by Confluent's Protobuf rules
    text = (
        'syntax = "proto3"; package seglog.test; message Flight '
        "{ string carrier = 1; int64 dep_delay = 2; int32 seats = 3; }"
    )
    assert client.test_compatibility(f"{topic}-value", Schema(text, "PROTOBUF"))
    wrong = 'syntax = "proto3"; package seglog.test; message Flight { int32 carrier = 1; }'
    assert not client.test_compatibility(f"{topic}-value", Schema(wrong, "PROTOBUF"))
    # a schema registered as .proto text (as Java and Go serializers send it) is served as
    # a FileDescriptorProto to the deserializer (format=serialized)
    proto_text = (
        'syntax = "proto3";\npackage seglog.test;\n'
        "message Flight {\n  string carrier = 1;\n  int32 dep_delay = 2;\n}\n"
    )
    text_id = client.register_schema(f"{topic}-text", Schema(proto_text, "PROTOBUF"))
    assert client.get_schema(text_id).schema_str == proto_text.strip()
    framed = b"\x00" + text_id.to_bytes(4, "big") + b"\x00" + value.SerializeToString()
    fresh = ProtobufDeserializer(
        flight, {"use.deprecated.format": False}, schema_registry_client=registry.client()
    )
    assert fresh(framed, SerializationContext(topic, MessageField.VALUE)) == value
    status, served = rest("GET", f"{registry.url}/schemas/ids/{text_id}?format=serialized")
    assert status == 200
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served["schema"]))
    assert [f.name for f in descriptor.message_type[0].field] == ["carrier", "dep_delay"]


def test_error_codes_and_the_server_stays_up(registry: Running, topic: str) -> None:
    url, subject = registry.url, f"{topic}-value"
    ok = rest("POST", f"{url}/subjects/{subject}/versions", {"schema": json.dumps(FLIGHT)})
    assert ok[0] == 200
    before = rest("GET", f"{url}/subjects/{subject}/versions/latest")
    cases: list[tuple[str, str, Any, int, int]] = [
        ("GET", "/subjects/no-such-subject/versions", None, 404, 40401),
        ("GET", f"/subjects/{subject}/versions/7", None, 404, 40402),
        ("GET", f"/subjects/{subject}/versions/zero", None, 422, 42202),
        ("GET", f"/subjects/{subject}/versions/0", None, 422, 42202),
        ("GET", "/schemas/ids/987654", None, 404, 40403),
        ("POST", f"/subjects/{subject}/versions", {"schema": "{not json"}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"schema": '{"type": "nope"}'}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"schema": "x", "schemaType": "XML"}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"nothing": 1}, 422, 42201),
        ("POST", f"/subjects/{subject}", {"schema": json.dumps(FLIGHT_V2)}, 404, 40403),
        ("POST", "/subjects/no-such-subject", {"schema": json.dumps(FLIGHT)}, 404, 40401),
        ("PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
        ("GET", f"/config/{subject}", None, 404, 40408),
        ("GET", "/no/such/path", None, 404, 404),
        ("POST", f"/subjects/{subject}/versions", {"schema": "[" * 100_000}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"schema": 5}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"schema": "{}", "references": "x"}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"schema": '"int"', "id": "abc"}, 422, 42201),
        ("DELETE", f"/subjects/{subject}/versions/1?permanent=true", None, 404, 40407),
    ]
    for method, path, body, status, code in cases:
        got = rest(method, url + path, body)
        assert got[0] == status, (method, path, got)
        assert got[1]["error_code"] == code, (method, path, got)
        assert isinstance(got[1]["message"], str)
    assert rest("POST", f"{url}/subjects/{subject}/versions", raw=b"[1, 2")[1]["error_code"] == 400
    nested = b'{"schema": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert rest("POST", f"{url}/subjects/{subject}/versions", raw=nested)[1]["error_code"] == 400
    # a body over 8 MiB: answered 413 from its Content-Length, before it is read
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", f"/subjects/{subject}/versions")
    conn.putheader("Content-Type", "application/vnd.schemaregistry.v1+json")
    conn.putheader("Content-Length", str(9 * 1024 * 1024))
    conn.endheaders(b'{"schema": "')
    response = conn.getresponse()
    assert (response.status, json.loads(response.read())["error_code"]) == (413, 413)
    conn.close()
    # nothing stored changed, and the server still answers
    assert rest("GET", f"{url}/subjects/{subject}/versions/latest") == before
    assert rest("GET", f"{url}/subjects/{subject}/versions")[1] == [1]
    assert registry.proc.process.poll() is None


def test_deletes_configs_and_modes(registry: Running, topic: str) -> None:
    url, subject = registry.url, f"{topic}-value"
    first = rest("POST", f"{url}/subjects/{subject}/versions", {"schema": json.dumps(FLIGHT)})[1]
    assert rest("PUT", f"{url}/config/{subject}", {"compatibility": "full_transitive"}) == (
        200, {"compatibility": "FULL_TRANSITIVE"})  # fmt: skip
    assert rest("GET", f"{url}/config/{subject}")[1] == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert rest("GET", f"{url}/config")[1] == {"compatibilityLevel": "BACKWARD"}
    # the client's ServerConfig form (compatibilityLevel) works too
    config = ServerConfig(compatibility_level=ConfigCompatibilityLevel.FORWARD)
    registry.client().set_config(f"{topic}-other", config)
    assert registry.client().get_compatibility(f"{topic}-other") == "FORWARD"
    # FULL: a field without a default cannot be added
    no_default = {**FLIGHT, "fields": [*FLIGHT["fields"], {"name": "x", "type": "int"}]}
    check = rest("POST", f"{url}/compatibility/subjects/{subject}/versions/latest?verbose=true",
                 {"schema": json.dumps(no_default)})  # fmt: skip
    assert check[1]["is_compatible"] is False
    assert check[1]["messages"]
    # a referencing schema pins what it references
    ref = {"type": "record", "name": "Trip", "namespace": "seglog.test",
           "fields": [{"name": "flight", "type": "seglog.test.Flight"}]}  # fmt: skip
    trip = rest("POST", f"{url}/subjects/{topic}-trip/versions", {
        "schema": json.dumps(ref),
        "references": [{"name": "seglog.test.Flight", "subject": subject, "version": 1}],
    })  # fmt: skip
    assert trip[0] == 200, trip
    assert rest("GET", f"{url}/subjects/{subject}/versions/1/referencedby")[1] == [trip[1]["id"]]
    assert rest("DELETE", f"{url}/subjects/{subject}")[1]["error_code"] == 42206
    assert rest("DELETE", f"{url}/subjects/{topic}-trip") == (200, [1])
    assert rest("DELETE", f"{url}/subjects/{topic}-trip?permanent=true") == (200, [1])
    # soft, then hard delete; a soft-deleted schema is still served by id
    assert rest("DELETE", f"{url}/subjects/{subject}?permanent=true")[1]["error_code"] == 40405
    assert rest("DELETE", f"{url}/subjects/{subject}") == (200, [1])
    assert rest("DELETE", f"{url}/subjects/{subject}")[1]["error_code"] == 40404
    assert subject not in rest("GET", f"{url}/subjects")[1]
    assert subject in rest("GET", f"{url}/subjects?deleted=true")[1]
    assert rest("GET", f"{url}/schemas/ids/{first['id']}")[0] == 200
    assert rest("DELETE", f"{url}/subjects/{subject}?permanent=true") == (200, [1])
    assert rest("GET", f"{url}/subjects/{subject}/versions")[1]["error_code"] == 40401
    # modes: READONLY refuses writes, IMPORT takes ids
    assert rest("PUT", f"{url}/mode/{subject}", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    refused = rest("POST", f"{url}/subjects/{subject}/versions", {"schema": json.dumps(FLIGHT)})
    assert refused[1]["error_code"] == 42205
    assert rest("PUT", f"{url}/mode/{subject}", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    imported = rest("POST", f"{url}/subjects/{subject}/versions",
                    {"schema": json.dumps(FLIGHT_V2), "id": 4242, "version": 9})  # fmt: skip
    assert imported == (200, {"id": 4242, "version": 9})
    assert rest("DELETE", f"{url}/mode/{subject}") == (200, {"mode": "IMPORT"})
    assert rest("GET", f"{url}/mode/{subject}?defaultToGlobal=true")[1] == {"mode": "READWRITE"}


def test_validation_on_produce(registry: Running, topic: str) -> None:
    """A raw value and a value with an unknown id are refused (87, their index in
    record_errors, nothing of the batch stored); a framed value with the subject's id is
    stored."""
    admin = AdminClient({"bootstrap.servers": registry.bootstrap})
    configs = {"confluent.value.schema.validation": "true"}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        future.result(15)
    client = registry.client()
    serializer = AvroSerializer(client, json.dumps(FLIGHT))
    good = serializer(
        {"carrier": "UA", "dep_delay": None}, SerializationContext(topic, MessageField.VALUE)
    )
    other_id = client.register_schema(f"{topic}-unrelated", Schema('"string"', "AVRO"))
    wrong_subject = b"\x00" + other_id.to_bytes(4, "big") + b"\x02a"
    unknown = b"\x00" + (10**6).to_bytes(4, "big") + b"xx"
    results: list[Any] = []
    producer = Producer({"bootstrap.servers": registry.bootstrap, "message.send.max.retries": 0})
    for value in (b"raw bytes", unknown, wrong_subject, good):
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: results.append(err))
        assert producer.flush(15) == 0
    codes = [None if e is None else e.code() for e in results]
    assert codes == [KafkaError.INVALID_RECORD] * 3 + [None]
    # record_errors names the records (Produce v8 and the flexible v9)
    with Wire(registry.bootstrap) as wire:
        for version in (8, 9):
            batch = make_batch([good, b"raw", good, unknown])
            part = (
                wire.call(produce_request(topic, batch, version))
                .responses[0]
                .partition_responses[0]
            )
            assert part.error_code == 87
            assert [e.batch_index for e in part.record_errors] == [1, 3]
            assert "wire format" in part.record_errors[0].batch_index_error_message
            assert "failed schema validation" in part.error_message
    stored = _consume(registry.bootstrap, topic, 1)
    assert [m.value() for m in stored] == [good]
    assert _consume(registry.bootstrap, topic, 2)[1:] == []


def test_ids_survive_kill_9(tmp_path: Path) -> None:
    proc, url = start_with_registry(tmp_path / "data")
    try:
        ids = {}
        for n in range(20):
            schema = {"type": "record", "name": f"R{n}", "fields": [{"name": "a", "type": "int"}]}
            status, body = rest(
                "POST", f"{url}/subjects/s{n}-value/versions", {"schema": json.dumps(schema)}
            )
            assert status == 200
            ids[n] = (body["id"], json.dumps(schema, separators=(",", ":")))
        rest("DELETE", f"{url}/subjects/s3-value")
        rest("PUT", f"{url}/config/s4-value", {"compatibility": "NONE"})
        proc.kill()  # SIGKILL: no clean shutdown
        port = int(url.rsplit(":", 1)[1])
        properties = tmp_path / "server.properties"  # the restart takes it from the file
        properties.write_text(f"schema.registry.listen=127.0.0.1:{port}\n")
        proc, url = start_with_registry(
            tmp_path / "data", ["--config", str(properties)], registry_port=port, flag=False
        )
        for schema_id, text in ids.values():
            assert rest("GET", f"{url}/schemas/ids/{schema_id}")[1]["schema"] == text
        assert "s3-value" not in rest("GET", f"{url}/subjects")[1]
        assert rest("GET", f"{url}/config/s4-value")[1] == {"compatibilityLevel": "NONE"}
        fresh = {"type": "record", "name": "Fresh", "fields": [{"name": "a", "type": "int"}]}
        status, body = rest(
            "POST", f"{url}/subjects/fresh-value/versions", {"schema": json.dumps(fresh)}
        )
        assert body["id"] == max(i for i, _t in ids.values()) + 1  # no id handed out twice
    finally:
        assert proc.stop() == 0, proc.log_text()
