"""``seglog.iceberg`` in process: commits of an embedded log's offset ranges to a SQL
catalog on SQLite, the offsets read back from snapshot summaries, the Avro → Iceberg
schema mapping, and the broker's committer pass (``IcebergTask.run_once``) over a data
directory without a broker process."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.types import (
    DecimalType,
    IntegerType,
    ListType,
    MapType,
    StringType,
    StructType,
    TimestamptzType,
)
from tests._wait import wait_until
from tests.storage._batches import txn_batch

import seglog
import seglog.iceberg as ice
from seglog.broker import free_port
from seglog.broker.log.iceberg_commits import IcebergTask
from seglog.storage import DataDir, Log, encode_control_batch, open_log

TOPIC = "orders.v1"  # a dot: pyiceberg must get a tuple identifier


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return ice.open_catalog(ice.catalog_properties(tmp_path / "data"))


def _log(tmp_path: Path, n: int, partition: int = 0) -> Log:
    plog = open_log(tmp_path / f"p{partition}", create=True, segment_bytes=4096)
    plog.publish([
        seglog.Message(key=b"k%d" % i, value=b"v%d" % i, timestamp=1_700_000_000_000 + i,
                       headers=[("h", b"%d" % i)])
        for i in range(n)
    ])  # fmt: skip
    return plog


def test_commit_ranges_appends_and_records_offsets(tmp_path: Path, catalog: Catalog) -> None:
    logs = {0: _log(tmp_path, 50, 0), 1: _log(tmp_path, 30, 1)}
    table = ice.load_topic_table(catalog, TOPIC)
    topic_id = uuid.uuid4()
    try:
        first = ice.commit_ranges(
            table, topic=TOPIC, topic_id=topic_id, logs=logs, committed={},
            ranges=[ice.OffsetRange(0, 0, 20), ice.OffsetRange(1, 0, 30)],
        )  # fmt: skip
        assert first.rows == 50
        assert first.offsets == {0: 20, 1: 30}
        # partition 1 has nothing new: its offset is carried into the next summary
        second = ice.commit_ranges(
            table, topic=TOPIC, topic_id=topic_id, logs=logs, committed=first.offsets,
            ranges=[ice.OffsetRange(0, 20, 50)],
        )  # fmt: skip
        assert second.offsets == {0: 50, 1: 30}
    finally:
        for plog in logs.values():
            plog.close()
    table = catalog.load_table(("seglog", TOPIC))
    assert ice.committed_offsets(table, topic_id) == {0: 50, 1: 30}
    assert ice.committed_offsets(table, uuid.uuid4()) == {}  # another topic of that name
    rows = table.scan().to_arrow().sort_by([("partition", "ascending"), ("offset", "ascending")])
    assert rows.column("offset").to_pylist() == list(range(50)) + list(range(30))
    assert rows.column("key").to_pylist()[:2] == [b"k0", b"k1"]
    assert rows.column("headers").to_pylist()[3] == [{"key": "h", "value": b"3"}]
    assert len(ice.data_files(table)) == 2  # one append, one hour each
    # a local warehouse is written through the FileIO that fsyncs each file on close
    assert type(table.io).__name__ == "SyncedFileIO"


def test_offsets_survive_snapshots_of_other_writers(tmp_path: Path, catalog: Catalog) -> None:
    """A snapshot another writer adds (no seglog keys in its summary) is skipped over."""
    plog = _log(tmp_path, 10)
    table = ice.load_topic_table(catalog, TOPIC)
    topic_id = uuid.uuid4()
    try:
        ice.commit_ranges(table, topic=TOPIC, topic_id=topic_id, logs={0: plog},
                          ranges=[ice.OffsetRange(0, 0, 10)], committed={})  # fmt: skip
    finally:
        plog.close()
    schema = table.schema().as_arrow()
    other = pa.Table.from_pylist([], schema=schema)
    table.append(other)  # e.g. a user's own append
    assert ice.summary_of(table)[f"{ice.OFFSETS_PREFIX}0"] == "10"
    assert ice.committed_offsets(catalog.load_table(("seglog", TOPIC)), topic_id) == {0: 10}


def test_avro_schemas_map_to_iceberg_types() -> None:
    avro = {
        "type": "record", "name": "R",
        "fields": [
            {"name": "n", "type": "int"},
            {"name": "s", "type": ["null", "string"]},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 9, "scale": 2}},
            {"name": "l", "type": {"type": "array", "items": "E"}},
            {"name": "m", "type": {"type": "map", "values": "long"}},
            {"name": "r", "type": {"type": "record", "name": "In",
                                   "fields": [{"name": "x", "type": "int"}]}},
        ],
    }  # fmt: skip
    schema = ice.avro_table_schema(json.dumps(avro))
    types = {f.name: f.field_type for f in schema.fields}
    assert types["n"] == IntegerType()
    assert types["s"] == StringType()
    assert types["e"] == StringType()
    assert types["at"] == TimestamptzType()
    assert types["d"] == DecimalType(9, 2)
    assert isinstance(types["l"], ListType)
    assert types["l"].element_type == StringType()
    assert isinstance(types["m"], MapType)
    assert isinstance(types["r"], StructType)
    assert isinstance(types["seglog"], StructType)
    assert not any(f.required for f in schema.fields)
    for bad in (
        {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]},
        {"type": "record", "name": "M", "fields": [{"name": "seglog", "type": "int"}]},
        {"type": "array", "items": "int"},
    ):
        with pytest.raises(ice.UnsupportedSchemaError):
            ice.avro_table_schema(json.dumps(bad))


def test_committer_pass_commits_closed_segments_and_resumes(tmp_path: Path) -> None:
    """``IcebergTask.run_once`` over a data directory: closed segments only (lag not due),
    then a new task (a restart) resumes from the table's summary: nothing twice."""
    data = tmp_path / "data"
    dd = DataDir(data)
    try:
        dd.create_topic(TOPIC, 1, {"seglog.iceberg.mode": "key_value", "segment.bytes": "2048"})
        plog = dd.log(TOPIC, 0)
        for i in range(40):  # one batch per publish: ~20 per segment
            plog.publish([seglog.Message(key=None, value=b"x" * 60 + b"%d" % i)])
        active = plog.segments()[-1].base_offset
        assert 0 < active < 40
        props = ice.catalog_properties(data)
        task = IcebergTask(dd, props)
        assert task.run_once() == 1
        assert task.run_once() == 0  # nothing new is closed
        catalog = ice.open_catalog(props)
        table = catalog.load_table(("seglog", TOPIC))
        assert table.scan().to_arrow().num_rows == active
        for i in range(40, 80):
            plog.publish([seglog.Message(key=None, value=b"x" * 60 + b"%d" % i)])
        restarted = IcebergTask(dd, props)
        assert restarted.run_once() == 1
        end = plog.segments()[-1].base_offset
        rows = catalog.load_table(("seglog", TOPIC)).scan().to_arrow()
        assert sorted(rows.column("offset").to_pylist()) == list(range(end))
    finally:
        dd.close()


def test_committer_holds_committed_records_only(tmp_path: Path) -> None:
    """Transactions: the table gets a read_committed view — no aborted record, no control
    record, nothing past the last stable offset (an ongoing transaction holds the rest)."""
    data = tmp_path / "data"
    dd = DataDir(data)
    try:
        dd.create_topic(TOPIC, 1, {"seglog.iceberg.mode": "key_value",
                                   "seglog.iceberg.lag.ms": "1"})  # fmt: skip
        plog = dd.log(TOPIC, 0)

        def end(pid: int, *, commit: bool) -> None:
            marker = encode_control_batch(
                pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=1_700_000_000_000
            )
            plog.append(marker, origin="coordinator")

        plog.append(txn_batch(7, 3, tag=b"aborted"))  # offsets 0-2
        plog.append(txn_batch(8, 2, tag=b"committed"))  # 3-4
        end(7, commit=False)  # 5
        end(8, commit=True)  # 6
        plog.append(txn_batch(9, 2, tag=b"open"))  # 7-8: ongoing, holds the LSO at 7
        plog.publish([seglog.Message(key=None, value=b"plain")])  # 9: behind the LSO
        assert plog.last_stable_offset == 7
        props = ice.catalog_properties(data)
        task = IcebergTask(dd, props)
        wait_until(lambda: task.run_once() == 1)  # once lag.ms (1 ms) has passed
        rows = ice.open_catalog(props).load_table(("seglog", TOPIC)).scan().to_arrow()
        assert sorted(rows.column("offset").to_pylist()) == [3, 4]
        end(9, commit=True)  # 10: the rest becomes stable
        wait_until(lambda: task.run_once() == 1)
        rows = ice.open_catalog(props).load_table(("seglog", TOPIC)).scan().to_arrow()
        assert sorted(rows.column("offset").to_pylist()) == [3, 4, 7, 8, 9]
    finally:
        dd.close()


def test_recreated_topic_never_sees_a_deleted_topics_rows(tmp_path: Path) -> None:
    """A topic deleted while no committer ran (its drop never happened) and created again:
    the committer purges the stale table first; ``drop_topic`` of the old id then keeps
    the new topic's table, and of the new id drops it."""
    data = tmp_path / "data"
    dd = DataDir(data)
    configs = {"seglog.iceberg.mode": "key_value", "seglog.iceberg.lag.ms": "1"}
    try:
        old = dd.create_topic(TOPIC, 1, configs)
        dd.log(TOPIC, 0).publish([seglog.Message(key=None, value=b"old%d" % i) for i in range(5)])
        props = ice.catalog_properties(data)
        first = IcebergTask(dd, props)
        wait_until(lambda: first.run_once() == 1)
        dd.delete_topic(TOPIC)
        new = dd.create_topic(TOPIC, 1, configs)
        dd.log(TOPIC, 0).publish([seglog.Message(key=None, value=b"new%d" % i) for i in range(2)])
        task = IcebergTask(dd, props)
        wait_until(lambda: task.run_once() == 1)
        catalog = ice.open_catalog(props)
        rows = catalog.load_table(("seglog", TOPIC)).scan().to_arrow()
        assert rows.column("value").to_pylist() == [b"new0", b"new1"]
        task.drop_topic(TOPIC, old.topic_id)  # late: the table is the new topic's now
        task.run_once()
        assert task.pending_drops == 0
        assert catalog.load_table(("seglog", TOPIC)).scan().to_arrow().num_rows == 2
        dd.delete_topic(TOPIC)
        task.drop_topic(TOPIC, new.topic_id)
        task.run_once()
        assert task.pending_drops == 0
        assert not catalog.table_exists(("seglog", TOPIC))
    finally:
        dd.close()


def test_drop_retries_while_the_catalog_is_unreachable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A deleted topic's drop that meets an unreachable catalog is kept, logged and
    retried with backoff; once the catalog answers, the table is dropped."""
    data = tmp_path / "data"
    dd = DataDir(data)
    try:
        info = dd.create_topic(TOPIC, 1, {"seglog.iceberg.mode": "key_value",
                                          "seglog.iceberg.lag.ms": "1"})  # fmt: skip
        dd.log(TOPIC, 0).publish([seglog.Message(key=None, value=b"x")])
        props = ice.catalog_properties(data)
        first = IcebergTask(dd, props)
        wait_until(lambda: first.run_once() == 1)
        dd.delete_topic(TOPIC)
        down = {"type": "rest", "uri": f"http://127.0.0.1:{free_port()}"}
        task = IcebergTask(dd, down, poll_s=0.01)
        task.drop_topic(TOPIC, info.topic_id)
        with caplog.at_level(logging.WARNING, logger="seglog.broker.log.iceberg_commits"):
            task.run_once()
        assert task.pending_drops == 1
        assert "retry in" in caplog.text
        task.catalog_properties = props  # the catalog is back
        wait_until(lambda: (task.run_once(), task.pending_drops == 0)[1], timeout=30)
        assert not ice.open_catalog(props).table_exists(("seglog", TOPIC))
    finally:
        dd.close()
