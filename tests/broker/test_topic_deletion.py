"""Deleting a topic cleans up beyond the local disk: its remote objects (segments,
indexes, manifest) leave moto's S3 server (Kafka's RemoteLogManager on topic deletion),
also when the store was down at deletion (retried in the background, DeleteTopics never
waits), and its Iceberg table is dropped (Redpanda's ``iceberg_delete``). A topic
created again under the same name sees neither the old objects nor the old rows."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from moto.server import ThreadedMotoServer
from pyiceberg.exceptions import NoSuchTableError
from tests._s3 import S3Server
from tests._wait import wait_until
from tests.iceberg import _table

from seglog.broker import BrokerProcess

pytestmark = pytest.mark.timeout(240)

TIERED = {"remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "0"}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    yield server
    server.stop()


def _objects(server: S3Server, url: str, topic: str) -> list[str]:
    """The keys of ``topic``'s objects under the tier's prefix."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    pages = server.client().get_paginator("list_objects_v2")  # type: ignore[attr-defined]
    keys = []
    for page in pages.paginate(Bucket=bucket, Prefix=f"{prefix}/{topic}-"):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return keys


def _create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def _delete(bootstrap: str, topic: str) -> float:
    """Delete ``topic``; returns how long DeleteTopics took, seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    began = time.monotonic()
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    return time.monotonic() - began


def _produce(bootstrap: str, topic: str, tag: bytes, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2048})
    for i in range(n):
        producer.produce(topic, value=tag + b"%05d" % i + b"." * 80)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.time_ns()}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    try:

        def more() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
            return len(out) >= n

        wait_until(more, timeout=60, interval=0, message="consume")
        assert consumer.poll(1.0) is None  # nothing beyond the n records
    finally:
        consumer.close()
    return out


def _recreated_sees_only_new_records(bootstrap: str, topic: str) -> None:
    _create(bootstrap, topic, **TIERED)
    _produce(bootstrap, topic, b"new", 5)
    assert _consume(bootstrap, topic, 5) == [b"new%05d" % i + b"." * 80 for i in range(5)]


def test_deleting_a_tiered_topic_deletes_its_remote_objects(
    broker_factory: Callable[..., BrokerProcess], s3: S3Server, topic: str
) -> None:
    url = s3.bucket()
    proc = broker_factory([
        "--seglog-remote-storage-url", url, "--seglog-remote-storage-endpoint-url", s3.endpoint,
    ])  # fmt: skip
    _create(proc.bootstrap, topic, **TIERED)
    _produce(proc.bootstrap, topic, b"old", 400)
    wait_until(
        lambda: any(k.endswith("manifest.json") for k in _objects(s3, url, topic))
        and any(k.endswith(".indexes") for k in _objects(s3, url, topic)),
        timeout=60, message="segments uploaded",
    )  # fmt: skip
    _delete(proc.bootstrap, topic)
    wait_until(lambda: _objects(s3, url, topic) == [], timeout=60, message="objects deleted")
    wait_until(lambda: "remote object(s) deleted" in proc.log_text(), timeout=30, message="log")
    _recreated_sees_only_new_records(proc.bootstrap, topic)


def test_store_down_at_deletion_is_retried_in_the_background(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    server = S3Server()
    url = server.bucket()
    proc = broker_factory([
        "--seglog-remote-storage-url", url,
        "--seglog-remote-storage-endpoint-url", server.endpoint,
    ])  # fmt: skip
    _create(proc.bootstrap, topic, **TIERED)
    _produce(proc.bootstrap, topic, b"old", 400)
    wait_until(lambda: len(_objects(server, url, topic)) > 2, timeout=60, message="uploads")
    host, port = server.endpoint.removeprefix("http://").split(":")
    server.stop()
    took = _delete(proc.bootstrap, topic)
    assert took < 5.0  # the store's retries (5 s per call) are not DeleteTopics' business
    wait_until(
        lambda: proc.log_text().count("failed (retry in") >= 2,
        timeout=60, message="retried with backoff",
    )  # fmt: skip
    again = ThreadedMotoServer(ip_address=host, port=int(port), verbose=False)
    again.start()  # moto keeps its buckets in-process
    try:
        server.running = True
        wait_until(lambda: _objects(server, url, topic) == [], timeout=90, message="deleted")
        _recreated_sees_only_new_records(proc.bootstrap, topic)
    finally:
        again.stop()
        server.running = False


def test_deleting_an_iceberg_topic_drops_its_table(broker: str, data_dir: Path, topic: str) -> None:
    configs = {"seglog.iceberg.mode": "key_value", "seglog.iceberg.lag.ms": "200"}
    _create(broker, topic, **configs)
    _produce(broker, topic, b"old", 50)
    wait_until(lambda: _table.count(data_dir, topic) == 50, timeout=60, message="rows")
    files = _table.catalog(data_dir).load_table(("seglog", topic)).inspect.files()
    paths = [Path(p.removeprefix("file://")) for p in files.column("file_path").to_pylist()]
    assert paths
    assert all(p.exists() for p in paths)
    _delete(broker, topic)

    def dropped() -> bool:
        try:
            _table.catalog(data_dir).load_table(("seglog", topic))
        except NoSuchTableError:
            return True
        return False

    wait_until(dropped, timeout=60, message="table dropped")
    wait_until(  # purged: the data files are deleted after the catalog entry
        lambda: not any(p.exists() for p in paths), timeout=30, message="data files deleted"
    )
    _create(broker, topic, **configs)
    _produce(broker, topic, b"new", 7)
    wait_until(lambda: _table.count(data_dir, topic) >= 7, timeout=60, message="new rows")
    rows = _table.rows(data_dir, topic)
    assert rows is not None
    assert rows.column("value").to_pylist() == [b"new%05d" % i + b"." * 80 for i in range(7)]


def test_pending_deletion_survives_a_restart(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    """The store is down at deletion and the broker stops before it is back: the next
    start resumes the deletion (``remote-deletions.json``)."""
    server = S3Server()
    url = server.bucket()
    args = ["--seglog-remote-storage-url", url,
            "--seglog-remote-storage-endpoint-url", server.endpoint]  # fmt: skip
    proc = broker_factory(args)
    _create(proc.bootstrap, topic, **TIERED)
    _produce(proc.bootstrap, topic, b"old", 400)
    wait_until(lambda: len(_objects(server, url, topic)) > 2, timeout=60, message="uploads")
    host, port = server.endpoint.removeprefix("http://").split(":")
    server.stop()
    _delete(proc.bootstrap, topic)
    wait_until(lambda: "failed (retry in" in proc.log_text(), timeout=60, message="a failure")
    assert proc.stop() == 0
    assert topic in (proc.data_dir / "remote-deletions.json").read_text()
    again = ThreadedMotoServer(ip_address=host, port=int(port), verbose=False)
    again.start()
    try:
        server.running = True
        assert _objects(server, url, topic)  # still there
        restarted = broker_factory(args)
        wait_until(lambda: _objects(server, url, topic) == [], timeout=90, message="deleted")
        wait_until(
            lambda: (restarted.data_dir / "remote-deletions.json").read_text() == "[]",
            timeout=30, message="nothing pending",
        )  # fmt: skip
    finally:
        again.stop()
        server.running = False
