"""Iceberg topics through a real broker: confluent-kafka produces, the broker commits each
closed segment (and, past ``seglog.iceberg.lag.ms``, the active one) to the topic's table,
and pyiceberg reads back exactly the records produced."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from tests._wait import wait_until
from tests.iceberg import _table

pytestmark = pytest.mark.timeout(120)

HOUR_MS = 3600 * 1000


def _create(broker: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, partitions, config=configs)])[topic].result(30)


def _produce(broker: str, topic: str, records: list[tuple[int, bytes | None, bytes, int]]) -> None:
    """(partition, key, value, timestamp ms) each, with two headers; every one acked."""
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5, "acks": "all"})
    errors: list[object] = []
    for i, (partition, key, value, ts) in enumerate(records):
        producer.produce(
            topic, value, key, partition=partition, timestamp=ts,
            headers=[("n", str(i).encode()), ("empty", None)],
            on_delivery=lambda err, _msg: err and errors.append(err),
        )  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == []


def test_key_value_round_trip(broker: str, data_dir: Path, topic: str) -> None:
    """Two partitions, small segments (many rolls) and a short lag: the table holds every
    record once — key (null too), value, partition, offset, timestamp, headers — and the
    snapshot summary records each partition's next offset."""
    _create(broker, topic, 2, **{
        "seglog.iceberg.mode": "key_value", "seglog.iceberg.lag.ms": "300",
        "segment.bytes": "4096",
    })  # fmt: skip
    base = 1_700_000_000_000
    records = [
        (i % 2, None if i % 7 == 0 else f"k{i}".encode(), b"v" * (i % 50) + bytes([i % 256]),
         base + i * 60_000)
        for i in range(400)
    ]  # fmt: skip
    _produce(broker, topic, records)
    got = wait_until(
        lambda: (t := _table.rows(data_dir, topic)) is not None and t.num_rows >= 400 and t,
        timeout=60, interval=0.2, message="table rows",
    )  # fmt: skip
    assert got.num_rows == 400
    want = sorted(
        [(p, k, v, ts) for p, k, v, ts in records], key=lambda r: (r[0], records.index(r))
    )
    assert got.column("partition").to_pylist() == [r[0] for r in want]
    per_partition = {0: 0, 1: 0}
    offsets = []
    for r in want:
        offsets.append(per_partition[r[0]])
        per_partition[r[0]] += 1
    assert got.column("offset").to_pylist() == offsets
    assert got.column("key").to_pylist() == [r[1] for r in want]
    assert got.column("value").to_pylist() == [r[2] for r in want]
    stamps = [int(t.timestamp() * 1000) for t in got.column("timestamp").to_pylist()]
    assert stamps == [r[3] for r in want]
    headers = got.column("headers").to_pylist()
    assert all(h[1] == {"key": "empty", "value": None} for h in headers)
    assert sorted(int(h[0]["value"]) for h in headers) == list(range(400))
    summary = _table.summary(data_dir, topic)
    assert summary["seglog.offsets.0"] == "200"
    assert summary["seglog.offsets.1"] == "200"


def test_partitioned_by_hour(broker: str, data_dir: Path, topic: str) -> None:
    """Records three hours apart land in three partitions of the hour transform: one data
    file each, and a scan filtered on the hour reads one file."""
    _create(broker, topic, 1, **{"seglog.iceberg.mode": "key_value",
                                 "seglog.iceberg.lag.ms": "200"})  # fmt: skip
    base = 1_700_000_000_000 // HOUR_MS * HOUR_MS
    _produce(broker, topic, [(0, b"k", b"v", base + h * HOUR_MS + 5) for h in range(3)])
    wait_until(lambda: _table.count(data_dir, topic) == 3, timeout=60, interval=0.2)
    table = _table.catalog(data_dir).load_table(("seglog", topic))
    spec = table.spec()
    assert [(f.name, str(f.transform)) for f in spec.fields] == [("timestamp_hour", "hour")]
    files = list(table.scan().plan_files())
    assert len(files) == 3
    hours = sorted(f.file.partition[0] for f in files)  # hours since the epoch
    assert hours == [base // HOUR_MS + h for h in range(3)]
    one = table.scan(row_filter=f"timestamp >= '{_iso(base + HOUR_MS)}' and "
                                f"timestamp < '{_iso(base + 2 * HOUR_MS)}'")  # fmt: skip
    assert len(list(one.plan_files())) == 1
    assert one.to_arrow().column("offset").to_pylist() == [1]


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(ms / 1000))


def test_closed_segments_commit_without_lag(broker: str, data_dir: Path, topic: str) -> None:
    """With the default lag (one minute) only rolled segments are committed: the table
    holds every record below the active segment's base offset, none above; once
    ``seglog.iceberg.lag.ms`` is lowered (IncrementalAlterConfigs), the active segment's
    records are committed too, without a roll."""
    _create(broker, topic, 1, **{"seglog.iceberg.mode": "key_value", "segment.bytes": "2048"})
    for n in range(0, 100, 10):  # ten batches of ~1.2 KiB: rolls every other batch
        _produce(broker, topic, [(0, b"k", b"x" * 100, 1_700_000_000_000 + i)
                                 for i in range(n, n + 10)])  # fmt: skip
    plog_dir = data_dir / f"{topic}-0"
    active_base = max(int(p.stem) for p in plog_dir.glob("*.log"))
    assert 0 < active_base < 100
    wait_until(lambda: _table.count(data_dir, topic) == active_base, timeout=60, interval=0.2)
    time.sleep(1)  # a later pass must not commit the active segment before the lag
    table = _table.rows(data_dir, topic)
    assert table is not None
    assert table.column("offset").to_pylist() == list(range(active_base))
    assert _table.summary(data_dir, topic)["seglog.offsets.0"] == str(active_base)
    # a lag set live: the active segment's records follow without a roll
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("seglog.iceberg.lag.ms", "200",
                    incremental_operation=AlterConfigOpType.SET),
    ])  # fmt: skip
    admin = AdminClient({"bootstrap.servers": broker})
    admin.incremental_alter_configs([resource])[resource].result(10)
    wait_until(lambda: _table.count(data_dir, topic) == 100, timeout=60, interval=0.2)
    assert max(int(p.stem) for p in plog_dir.glob("*.log")) == active_base  # no roll
    table = _table.rows(data_dir, topic)
    assert table is not None
    assert table.column("offset").to_pylist() == list(range(100))
