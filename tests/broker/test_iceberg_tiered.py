"""An Iceberg topic that is also tiered keeps its table on the object store: with
``seglog.remote.storage.url`` on moto's S3 server, the table's data and metadata files
are written under ``<url>/iceberg/warehouse`` through pyiceberg's S3 FileIO (the tier's
endpoint and credentials), the SQLite catalog stays local, and pyiceberg reads the rows
back from the store; deleting the topic purges them there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from sqlalchemy.exc import OperationalError
from tests._s3 import S3Server
from tests._wait import wait_until

from seglog.broker import BrokerProcess

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    server = S3Server()
    yield server
    server.stop()


def _catalog(data_dir: Path, endpoint: str) -> Catalog:
    """The broker's local SQLite catalog, with the store's endpoint for the S3 FileIO."""
    root = data_dir.resolve() / "iceberg"
    return load_catalog(
        "seglog",
        type="sql",
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=(root / "warehouse").as_uri(),
        **{"s3.endpoint": endpoint, "s3.region": "us-east-1"},
    )


def _keys(s3: S3Server, url: str, under: str) -> list[str]:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    pages = s3.client().get_paginator("list_objects_v2")  # type: ignore[attr-defined]
    keys = []
    for page in pages.paginate(Bucket=bucket, Prefix=f"{prefix}/{under}"):
        keys += [obj["Key"] for obj in page.get("Contents", [])]
    return keys


def test_tiered_iceberg_topic_writes_its_table_to_the_store(
    broker_factory: Callable[..., BrokerProcess], s3: S3Server, topic: str
) -> None:
    url = s3.bucket()
    proc = broker_factory([
        "--seglog-remote-storage-url", url, "--seglog-remote-storage-endpoint-url", s3.endpoint,
    ])  # fmt: skip
    configs = {
        "seglog.iceberg.mode": "key_value", "seglog.iceberg.lag.ms": "200",
        "remote.storage.enable": "true", "segment.bytes": "4096",
    }  # fmt: skip
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5})
    values = [b"v%04d" % i + b"." * 60 for i in range(120)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0

    def table_rows() -> int:
        try:
            table = _catalog(proc.data_dir, s3.endpoint).load_table(("seglog", topic))
        except (NoSuchTableError, OperationalError):
            return 0
        return table.scan().to_arrow().num_rows

    wait_until(lambda: table_rows() == 120, timeout=90, message="rows on the store")
    table = _catalog(proc.data_dir, s3.endpoint).load_table(("seglog", topic))
    warehouse = f"{url}/iceberg/warehouse"
    assert table.location() == f"{warehouse}/seglog.db/{topic}"
    files = table.inspect.files().column("file_path").to_pylist()
    assert files
    assert all(f.startswith(f"{warehouse}/seglog.db/{topic}/data/") for f in files)
    assert table.metadata_location.startswith(warehouse)
    rows = table.scan().to_arrow().sort_by("offset")
    assert rows.column("value").to_pylist() == values
    stored = _keys(s3, url, f"iceberg/warehouse/seglog.db/{topic}/")
    assert any(k.endswith(".parquet") for k in stored)
    assert any(k.endswith(".metadata.json") for k in stored)
    local = proc.data_dir / "iceberg" / "warehouse"
    assert not list(local.rglob("*.parquet"))  # nothing on the broker's disk
    assert (proc.data_dir / "iceberg" / "catalog.db").exists()  # the catalog stays local
    # deleting the topic purges the table's files from the store
    admin.delete_topics([topic])[topic].result(30)
    wait_until(
        lambda: not any(k.endswith(".parquet") for k in _keys(s3, url, "iceberg/warehouse/")),
        timeout=60, message="table files purged",
    )  # fmt: skip
