"""Wire mode over TLS and SASL_SSL (SCRAM-SHA-512): batch and availableNow streaming reads,
the sink, and wrong credentials, through a real ``seglog serve`` with those listeners and
Spark's Kafka-source option names (``kafka.sasl.jaas.config``, ``kafka.ssl.*``)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import trustme
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.spark._fetch import RAW_OPTIONS, raw_fetch_applies, read_raw_range
from seglog.spark._options import ReadOptions
from seglog.spark._security import client_options, parse_jaas_config
from seglog.spark._wire import WireRangePartition, read_wire_range, wire_bounds

from ._secured import SecuredBroker, start_secured

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="{user}" password="{password}";'
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    broker = start_secured(tmp_path_factory.mktemp("wire-secured"))
    try:
        yield broker
    finally:
        assert broker.proc.stop() == 0, broker.proc.log_text()
        assert "Traceback" not in broker.proc.log_text()


def _spark_options(secured: SecuredBroker, password: str = "alice-secret") -> dict[str, str]:
    """SASL_SSL SCRAM-SHA-512 in the names a Spark Kafka-source user writes."""
    return {
        "kafka.bootstrap.servers": secured.bootstrap("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS.format(user="alice", password=password),
        "kafka.ssl.ca.location": str(secured.ca),
    }


def _create_and_produce(
    secured: SecuredBroker, topic: str, count: int, partitions: int = 2
) -> set[tuple[int, str, str]]:
    """Create ``topic`` and produce ``count`` records over SASL_SSL; {(partition, key, value)}."""
    conf = secured.librdkafka()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
    producer = Producer({**conf, "linger.ms": 5})
    for i in range(count):
        producer.produce(
            topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions
        )
    assert producer.flush(30) == 0
    return {(i % partitions, f"k{i}", f"v{i}") for i in range(count)}


def _read(spark: Any, options: dict[str, str], topic: str) -> Any:
    reader = spark.read.format("seglog").option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().selectExpr(
        "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"
    )


def test_batch_read_over_sasl_ssl_scram_sha_512(spark: Any, secured: SecuredBroker) -> None:
    sent = _create_and_produce(secured, "sec-batch", 500)
    rows = _read(spark, _spark_options(secured), "sec-batch").collect()
    assert {(r["partition"], r["key"], r["value"]) for r in rows} == sent
    assert len(rows) == len(sent)
    # kafka-python's names for the same settings read the same rows
    other = {
        "kafka.bootstrap.servers": secured.bootstrap("SASL_SSL"),
        "kafka.security.protocol": "sasl_ssl",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.plain.username": "bob",
        "kafka.sasl.plain.password": "bob-secret",
        "kafka.ssl.cafile": str(secured.ca),
    }
    again = _read(spark, other, "sec-batch").collect()
    assert sorted(tuple(r) for r in again) == sorted(tuple(r) for r in rows)


def test_batch_read_over_tls_with_a_client_certificate(spark: Any, secured: SecuredBroker) -> None:
    sent = _create_and_produce(secured, "sec-tls", 50)
    options = {
        "kafka.bootstrap.servers": secured.bootstrap("SSL"),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(secured.ca),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.certificate.location": str(secured.client_pem),
        "kafka.ssl.key.location": str(secured.client_pem),
    }
    rows = _read(spark, options, "sec-tls").collect()
    assert {(r["partition"], r["key"], r["value"]) for r in rows} == sent
    assert len(rows) == len(sent)
    assert "TLS client User:CN=alice" in secured.proc.log_text()


def test_available_now_stream_over_sasl_ssl(
    spark: Any, secured: SecuredBroker, tmp_path: Path
) -> None:
    sent = _create_and_produce(secured, "sec-stream", 300)
    out = tmp_path / "out"
    reader = spark.readStream.format("seglog").option("subscribe", "sec-stream")
    for name, value in {
        **_spark_options(secured),
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "120",
    }.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .selectExpr(
            "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"
        )
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    table = pq.read_table(out)
    rows = list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))
    named = [dict(zip(table.column_names, r, strict=True)) for r in rows]
    assert {(r["partition"], r["key"], r["value"]) for r in named} == sent
    assert len({(r["partition"], r["offset"]) for r in named}) == len(sent) == 300
    assert len(query.recentProgress) >= 300 // 120  # the rate limit split the backlog


def test_wrong_password_fails_fast_with_a_clear_error(spark: Any, secured: SecuredBroker) -> None:
    _create_and_produce(secured, "sec-refused", 5)
    started = time.monotonic()
    with pytest.raises(Exception, match=r"(?i)authentication") as info:
        _read(spark, _spark_options(secured, password="Wr0ngPassw0rd"), "sec-refused").collect()
    assert time.monotonic() - started < 30  # librdkafka alone waits out its 30 s timeout
    assert "Wr0ngPassw0rd" not in str(info.value)  # the password is not in the message
    # an executor whose credentials are refused (raw reader and confluent-kafka fallback)
    kafka = client_options(
        {k.removeprefix("kafka."): v for k, v in _spark_options(secured, "Wr0ngPassw0rd").items()}
    )
    for extra in ({}, {"fetch.wait.max.ms": "100"}):
        part = WireRangePartition("sec-refused", 0, 0, 3, False, {**kafka, **extra})
        started = time.monotonic()
        with pytest.raises(Exception, match=r"(?i)authentication"):
            list(read_wire_range(part, timeout_s=60))
        assert time.monotonic() - started < 30


def test_write_over_sasl_ssl(spark: Any, secured: SecuredBroker) -> None:
    conf = secured.librdkafka()
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("sec-sink", num_partitions=2)])["sec-sink"].result(30)
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    writer = df.write.format("seglog").option("topic", "sec-sink").mode("append")
    for name, value in _spark_options(secured).items():
        writer = writer.option(name, value)
    writer.save()
    got = _read(spark, _spark_options(secured), "sec-sink").collect()
    assert sorted((r["key"], r["value"], r["partition"]) for r in got) == sorted(rows)
    # what a plain consumer sees: the same records, each once
    consumer = Consumer({**conf, "group.id": "sec-sink-check"})
    try:
        high = [
            consumer.get_watermark_offsets(KafkaTopicPartition("sec-sink", p), 30)[1]
            for p in (0, 1)
        ]
    finally:
        consumer.close()
    assert sum(high) == 200
    bad = df.write.format("seglog").option("topic", "sec-sink").mode("append")
    for name, value in _spark_options(secured, password="Wr0ngPassw0rd").items():
        bad = bad.option(name, value)
    started = time.monotonic()
    with pytest.raises(Exception, match=r"(?i)authentication"):
        bad.save()
    assert time.monotonic() - started < 60


def test_raw_reader_and_confluent_consumer_agree_over_sasl_ssl(secured: SecuredBroker) -> None:
    sent = _create_and_produce(secured, "sec-readers", 2000, partitions=1)
    kafka = secured.librdkafka()
    assert raw_fetch_applies(kafka)
    raw = list(read_raw_range(kafka, "sec-readers", 0, 0, 2000, include_headers=False))
    fallback = {**kafka, "fetch.wait.max.ms": "100"}
    assert not raw_fetch_applies(fallback)
    via_consumer = list(
        read_wire_range(WireRangePartition("sec-readers", 0, 0, 2000, False, fallback))
    )

    def keyed(batches: list[Any]) -> list[tuple[int, bytes, bytes]]:
        return sorted(
            (o, k, v)
            for b in batches
            for o, k, v in zip(
                *(b.column(c).to_pylist() for c in ("offset", "key", "value")), strict=True
            )
        )

    assert keyed(raw) == keyed(via_consumer)
    assert {(k.decode(), v.decode()) for _, k, v in keyed(raw)} == {(k, v) for _, k, v in sent}


def test_security_option_names() -> None:
    assert parse_jaas_config(JAAS.format(user="u", password="p q=r;s")) == (
        "SCRAM",
        {"username": "u", "password": "p q=r;s"},
    )
    escaped = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="x\\"y";'  # noqa: E501
    assert parse_jaas_config(escaped) == ("PLAIN", {"username": "a", "password": 'x"y'})
    options = ReadOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.security.protocol": "sasl_ssl",
            "kafka.sasl.mechanism": "scram-sha-512",
            "kafka.sasl.jaas.config": JAAS.format(user="u", password="p"),
            "kafka.ssl.cafile": "/ca.pem",
            "subscribe": "t",
        },
        streaming=False,
    )
    assert options.kafka == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
    }
    assert set(options.kafka) <= RAW_OPTIONS
    assert client_options({"sasl.jaas.config": escaped})["sasl.mechanism"] == "PLAIN"
    assert client_options({"ssl.endpoint.identification.algorithm": ""}) == {
        "ssl.endpoint.identification.algorithm": "none"
    }
    pem = client_options({"ssl.keystore.location": "/k.pem", "ssl.keystore.type": "PEM"})
    assert pem == {"ssl.certificate.location": "/k.pem", "ssl.key.location": "/k.pem"}
    refused = {
        r"truststore.*PEM.*ssl\.ca\.location": {"ssl.truststore.location": "/t.jks"},
        r"JKS keystore": {"ssl.keystore.location": "/k.jks", "ssl.keystore.type": "JKS"},
        r"Krb5LoginModule is not supported": {
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"
        },
        r"SCRAM-SHA-256 or SCRAM-SHA-512": {"sasl.jaas.config": JAAS.format(user="u", password="")},
        r"disagree": {
            "sasl.username": "a",
            "sasl.jaas.config": JAAS.format(user="b", password="p"),
            "sasl.mechanism": "SCRAM-SHA-256",
        },
        r"must read like": {"sasl.jaas.config": "username=u"},
    }
    for pattern, kafka in refused.items():
        with pytest.raises(ValueError, match=pattern):
            client_options(kafka)
    assert not raw_fetch_applies(
        {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}
    )
    assert raw_fetch_applies({"bootstrap.servers": "h:1", "security.protocol": "SSL"})


def test_an_untrusted_broker_certificate_fails_fast(secured: SecuredBroker, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    options = ReadOptions.parse(
        {**_spark_options(secured), "kafka.ssl.ca.location": str(other_ca), "subscribe": "t"},
        streaming=False,
    )
    started = time.monotonic()
    with pytest.raises(KafkaException, match="certificate verify failed"):
        wire_bounds(options)  # planning, through confluent-kafka
    with pytest.raises(ssl.SSLCertVerificationError):
        list(read_raw_range(options.kafka, "t", 0, 0, 1, include_headers=False))
    assert time.monotonic() - started < 30
