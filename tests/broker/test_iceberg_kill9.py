"""Exactly once across crashes: a real ``seglog serve`` is killed with SIGKILL while its
Iceberg committer writes a snapshot's data files — the moment a new Parquet file appears
in the warehouse, before the catalog commit that would reference it — again and again,
under produce load. After the last restart the table must hold every record of the log
once: no row lost, none twice, and the crashes must have left unreferenced data files
(proof that kills landed between write and commit)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests._wait import wait_until
from tests.iceberg import _table

from seglog.broker import BrokerProcess, start_broker
from seglog.storage import DataDir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC = "orders"
PARTITIONS = 2
ROUNDS = 7


def _parquet_files(data: Path) -> set[Path]:
    return set((data / "iceberg" / "warehouse").rglob("*.parquet"))


def _produce_until(broker: str, stop: threading.Event, round_: int) -> None:
    """Produce ~1 KiB records, ~2 MB/s, until ``stop`` or the broker dies (errors expected
    then)."""
    producer = Producer({
        "bootstrap.servers": broker, "linger.ms": 2, "acks": "all",
        "message.timeout.ms": 5000, "retries": 0,
    })  # fmt: skip
    i = 0
    while not stop.is_set():
        try:
            producer.produce(TOPIC, f"{round_}-{i}".encode().ljust(1000, b"."), str(i).encode())
        except BufferError:
            producer.poll(0.05)
            continue
        i += 1
        if i % 200 == 0:
            producer.poll(0.1)  # paces the load (the kill point is a file appearing)
    producer.flush(5)


def _log_records(data: Path) -> dict[int, list[tuple[int, bytes | None]]]:
    """partition → [(offset, value)] of every record in the log (read-only open)."""
    out: dict[int, list[tuple[int, bytes | None]]] = {}
    dd = DataDir(data, create=False, read_only=True)
    try:
        for p in range(PARTITIONS):
            plog = dd.log(TOPIC, p)
            offset, records = 0, []
            while True:
                offset, msgs = plog.consume(offset, 10_000)
                if not msgs:
                    break
                records += [(m.offset, m.value) for m in msgs]
            out[p] = records
    finally:
        dd.close()
    return out


def _start(data: Path) -> BrokerProcess:
    return start_broker(data, extra_args=["--log-segment-bytes", str(1 << 20)])


def test_kill9_between_write_and_commit_loses_and_doubles_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    killed_mid_commit = 0
    for round_ in range(ROUNDS):
        proc = _start(data)
        try:
            if round_ == 0:
                admin = AdminClient({"bootstrap.servers": proc.bootstrap})
                configs = {"seglog.iceberg.mode": "key_value", "seglog.iceberg.lag.ms": "100"}
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, config=configs)])[TOPIC].result(30)
            before = _parquet_files(data)
            stop = threading.Event()
            producer = threading.Thread(target=_produce_until, args=(proc.bootstrap, stop, round_))
            producer.start()
            try:
                # the kill point: the data file of the 1st, 2nd or 3rd commit of this run
                # exists (the commits before it completed)
                wanted = 1 + round_ % 3
                wait_until(lambda b=before, n=wanted: len(_parquet_files(data) - b) >= n,
                           timeout=60, interval=0.001)  # fmt: skip
                proc.kill()
            finally:
                stop.set()
                producer.join()
        finally:
            proc.kill()
        written = _parquet_files(data) - before
        table = _table.catalog(data).load_table(("seglog", TOPIC))
        referenced = {Path(f.file.file_path.removeprefix("file://"))
                      for f in table.scan().plan_files()}  # fmt: skip
        killed_mid_commit += bool(written - referenced)

    proc = _start(data)
    try:
        ends: dict[int, int] = {}

        def caught_up() -> bool:
            summary = _table.summary(data, TOPIC)
            return all(
                summary.get(f"seglog.offsets.{p}") == str(ends[p]) for p in range(PARTITIONS)
            )

        # the log end offsets, through the broker's own view after recovery
        consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": "kill9"})
        for p in range(PARTITIONS):
            ends[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
        consumer.close()
        wait_until(caught_up, timeout=120, interval=0.2, message="table caught up with the log")
    finally:
        assert proc.stop() == 0, proc.log_text()
    logs = _log_records(data)
    rows = _table.rows(data, TOPIC)
    assert rows is not None
    got: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    for p, o, v in zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(),
                       rows.column("value").to_pylist(), strict=True):  # fmt: skip
        got[p].append((o, v))
    for p in range(PARTITIONS):
        assert len(logs[p]) == ends[p] > 0
        assert [o for o, _ in got[p]] == list(range(ends[p]))  # none lost, none twice
        assert got[p] == logs[p]  # byte for byte
    assert killed_mid_commit >= 1, "no kill landed between a data file write and its commit"
