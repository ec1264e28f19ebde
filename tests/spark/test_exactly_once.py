"""The exactly-once wire sink (``exactlyOnce=true``) and read_committed wire reads, against a
real ``seglog serve``, read back by confluent-kafka consumers and the Spark wire source.

Task retries need a session with ``local[2,3]``: test_exactly_once_retry.py runs that job
in a subprocess. Here (the shared ``local[2]`` session, no retries): a committed write, a
failed job (nothing visible to read_committed, the failed task's open transaction aborted
at once), a streaming micro-batch replayed after its commit (skipped, nothing written), and
a commit cut in the middle (the replay writes only the tasks that had not committed).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka.errors as ke
import pyarrow as pa
import pytest
from confluent_kafka import Producer

from seglog.broker import BrokerProcess, start_broker
from seglog.spark._exactly_once import (
    TxnWritten,
    abort_transactions,
    commit_transactions,
    write_in_transaction,
)
from seglog.spark._options import ReadOptions, WriteOptions
from seglog.spark._txn import TRANSACTION, Coordinators, Transaction, end_txn
from seglog.spark._wire import WireRangePartition, read_wire_range, wire_bounds

from ._exactly_once_helpers import consumed, create_topic, failing_rows, spark_read


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("eos") / "data")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()
        assert "Traceback" not in proc.log_text(), proc.log_text()


@pytest.fixture
def small_batches(spark: Any) -> Iterator[None]:
    """The writer gets its input in Arrow batches of 200 rows (not 10 000), so a task sends
    what it gathered before a UDF fails further on."""
    name = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(name)
    spark.conf.set(name, "200")
    try:
        yield
    finally:
        spark.conf.set(name, before)


def _write(df: Any, bootstrap: str, topic: str) -> None:
    (df.write.format("seglog").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).option("exactlyOnce", "true").mode("append").save())  # fmt: skip


def test_batch_write_is_seen_once_by_read_committed_readers(
    spark: Any, broker: BrokerProcess
) -> None:
    topic = "eos-batch"
    create_topic(broker.bootstrap, topic, 2)
    _write(failing_rows(spark, 3000, set(), first_attempt_only=True), broker.bootstrap, topic)
    expected = collections.Counter(str(i) for i in range(3000))
    assert consumed(broker.bootstrap, topic, 2, "read_committed") == expected
    assert spark_read(spark, broker.bootstrap, topic, "read_committed") == expected
    # the commit markers are no rows, for read_uncommitted readers either
    assert spark_read(spark, broker.bootstrap, topic, "read_uncommitted") == expected


def test_failed_job_leaves_nothing_visible_to_read_committed(
    spark: Any, broker: BrokerProcess, small_batches: None
) -> None:
    topic = "eos-failed"
    create_topic(broker.bootstrap, topic, 1)
    # task 0 (ids 0-1999) succeeds; task 1 fails at its last rows, after producing some
    df = failing_rows(spark, 4000, {3990}, first_attempt_only=False)
    with pytest.raises(Exception, match="UDF fails at row 3990"):
        _write(df, broker.bootstrap, topic)
    assert consumed(broker.bootstrap, topic, 1, "read_committed") == collections.Counter()
    assert spark_read(spark, broker.bootstrap, topic, "read_committed") == collections.Counter()
    # the records were written, in transactions the driver aborted: task 0's after its
    # success, task 1's (left open by the failed attempt) by a new epoch of its id
    uncommitted = spark_read(spark, broker.bootstrap, topic, "read_uncommitted")
    assert set(uncommitted) >= {str(i) for i in range(2000)}
    assert any(2000 <= int(i) < 3990 for i in uncommitted)
    # so nothing holds the last stable offset: a later write is visible at once
    _write(failing_rows(spark, 10, set(), first_attempt_only=True), broker.bootstrap, topic)
    assert spark_read(spark, broker.bootstrap, topic, "read_committed") == collections.Counter(
        str(i) for i in range(10)
    )


def _stream_copy(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path) -> None:
    query = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("value")
        .writeStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None


def test_stream_replay_of_a_committed_batch_writes_nothing(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    source, sink = "eos-stream-in", "eos-stream-out"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 2)
    _write(failing_rows(spark, 500, set(), first_attempt_only=True), broker.bootstrap, source)
    checkpoint = tmp_path / "checkpoint"
    _stream_copy(spark, broker.bootstrap, source, sink, checkpoint)
    expected = collections.Counter(str(i) for i in range(500))
    assert consumed(broker.bootstrap, sink, 2, "read_committed") == expected
    # the driver "died" after committing batch 0, before Spark recorded it: the restart
    # runs batch 0 again; its tasks find the batch committed for their ids and skip it
    commits = sorted(p.name for p in (checkpoint / "commits").iterdir() if p.name[0] != ".")
    assert commits == ["0"]
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)
    _stream_copy(spark, broker.bootstrap, source, sink, checkpoint)
    assert (checkpoint / "commits" / "0").exists()
    assert consumed(broker.bootstrap, sink, 2, "read_committed") == expected
    # not even an aborted copy: the replay wrote no record
    assert consumed(broker.bootstrap, sink, 2, "read_uncommitted") == expected


def _rows(ids: range) -> Iterator[pa.RecordBatch]:
    values = pa.array([f"{i}|".encode() for i in ids])
    yield pa.record_batch([values], names=["value"])


def test_commit_cut_midway_then_replayed(broker: BrokerProcess) -> None:
    """A driver that died after committing task 0's transaction and before task 1's: the
    replay of the batch skips task 0 (committed) and writes task 1 again (its first
    transaction is fenced and aborted by the replay's InitProducerId)."""
    topic = "eos-cut"
    create_topic(broker.bootstrap, topic, 2)
    options = WriteOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, "exactlyOnce": "true"}
    )
    first = [write_in_transaction(_rows(range(i * 100, i * 100 + 100)), options, "cut", i, 7)
             for i in (0, 1)]  # fmt: skip
    commit_transactions(first[:1], options)  # the driver dies here
    replay = [write_in_transaction(_rows(range(i * 100, i * 100 + 100)), options, "cut", i, 7)
              for i in (0, 1)]  # fmt: skip
    assert [m.replayed for m in replay] == [True, False]
    assert commit_transactions(replay, options) == 100
    expected = collections.Counter(str(i) for i in range(200))
    assert consumed(broker.bootstrap, topic, 2, "read_committed") == expected
    # a commit retried after a crash (EndTxn on a committed transaction) succeeds again
    assert commit_transactions(replay, options) == 100
    # the stale first transaction of task 1 cannot be committed any more
    with pytest.raises(RuntimeError, match=r"task 1 .* aborted before the commit"):
        commit_transactions(first[1:], options)
    assert consumed(broker.bootstrap, topic, 2, "read_committed") == expected


def test_abort_fences_the_transactions_of_failed_tasks(broker: BrokerProcess) -> None:
    topic = "eos-abort"
    create_topic(broker.bootstrap, topic, 1)
    options = WriteOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, "exactlyOnce": "true"}
    )
    ok = write_in_transaction(_rows(range(10)), options, "ab", 0)
    left_open = write_in_transaction(_rows(range(10, 20)), options, "ab", 1)
    assert isinstance(left_open, TxnWritten)
    # Spark aborts with no message for the failed task 1
    abort_transactions([ok, None], options, "ab")
    assert consumed(broker.bootstrap, topic, 1, "read_committed") == collections.Counter()
    assert sum(consumed(broker.bootstrap, topic, 1, "read_uncommitted").values()) == 20
    # aborting twice is harmless; committing an aborted transaction is refused
    abort_transactions([ok, None], options, "ab")
    with pytest.raises(RuntimeError, match="aborted before the commit"):
        commit_transactions([ok], options)


def test_a_timeout_above_the_cluster_maximum_fails_the_task(broker: BrokerProcess) -> None:
    options = WriteOptions.parse({
        "kafka.bootstrap.servers": broker.bootstrap, "topic": "eos-timeout",
        "exactlyOnce": "true", "kafka.transaction.timeout.ms": str(24 * 3600 * 1000),
    })  # fmt: skip
    with pytest.raises(ke.InvalidTransactionTimeoutError, match=r"transaction\.max\.timeout\.ms"):
        write_in_transaction(_rows(range(3)), options, "timeout", 0)


def test_option_errors_name_the_option() -> None:
    wire = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "exactlyOnce": "true"}
    assert WriteOptions.parse(wire).exactly_once
    assert WriteOptions.parse(wire).transaction_timeout_ms == 900_000
    with pytest.raises(ValueError, match="exactlyOnce needs kafka"):
        WriteOptions.parse({**wire, "kafka.sasl.mechanism": "GSSAPI",
                            "kafka.security.protocol": "SASL_PLAINTEXT"})  # fmt: skip
    with pytest.raises(ValueError, match="exactlyOnce must be true or false"):
        WriteOptions.parse({**wire, "exactlyOnce": "yes"})
    with pytest.raises(ValueError, match=r"kafka\.transaction\.timeout\.ms must be an integer"):
        WriteOptions.parse({**wire, "kafka.transaction.timeout.ms": "15m"})
    # path mode is exactly once already: the option changes nothing there
    assert not WriteOptions.parse({"path": "/tmp/x", "exactlyOnce": "true"}).exactly_once
    read = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    assert ReadOptions.parse(read, streaming=False).isolation_level == "read_uncommitted"
    committed = ReadOptions.parse({**read, "kafka.isolation.level": "READ_COMMITTED"},
                                  streaming=False)  # fmt: skip
    assert committed.isolation_level == "read_committed"
    assert "isolation.level" not in committed.kafka  # the raw reader still applies
    with pytest.raises(ValueError, match=r"kafka\.isolation\.level must be"):
        ReadOptions.parse({**read, "kafka.isolation.level": "committed"}, streaming=False)


@pytest.mark.parametrize("client", ["raw Fetch", "confluent-kafka"])
def test_wire_reads_honour_the_isolation_level(broker: BrokerProcess, client: str) -> None:
    """5 plain records, an aborted transaction of 7, an open one of 3, then 1 plain: a
    read_committed read ends at the open transaction (the last stable offset) without the
    aborted records; read_uncommitted reads all 16 (the ABORT marker is no row). The
    confluent-kafka path is taken for any option the raw reader lacks."""
    topic = f"eos-isolation-{client.split(maxsplit=1)[0]}"
    create_topic(broker.bootstrap, topic, 1)
    options = WriteOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, "exactlyOnce": "true"}
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce(topic, f"{i}|".encode())
    assert producer.flush(30) == 0
    aborted = write_in_transaction(_rows(range(5, 12)), options, topic, 0)
    abort_transactions([aborted], options, None)
    write_in_transaction(_rows(range(12, 15)), options, topic, 1)  # left open
    producer.produce(topic, b"15|")
    assert producer.flush(30) == 0
    extra = {} if client == "raw Fetch" else {"kafka.fetch.min.bytes": "1"}
    for level, expected in (("read_committed", range(5)), ("read_uncommitted", range(16))):
        read = ReadOptions.parse(
            {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
             "kafka.isolation.level": level, **extra},
            streaming=False,
        )  # fmt: skip
        ((start, end),) = wire_bounds(read).values()
        assert (start, end) == ((0, 13) if level == "read_committed" else (0, 17))
        part = WireRangePartition(topic, 0, start, end, False, read.kafka, True,
                                  read.isolation_level)  # fmt: skip
        values = [v for b in read_wire_range(part) for v in b.column("value").to_pylist()]
        assert values == [f"{i}|".encode() for i in expected], level


def test_a_fenced_task_fails_the_commit_after_every_other_commits(broker: BrokerProcess) -> None:
    """12 tasks, committed by the driver's threads; task 5 was fenced by a newer attempt
    (speculation): the commit raises naming it, and the 11 others are committed."""
    topic = "eos-many"
    create_topic(broker.bootstrap, topic, 3)
    options = WriteOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, "exactlyOnce": "true"}
    )
    written = [write_in_transaction(_rows(range(i * 10, i * 10 + 10)), options, "many", i)
               for i in range(12)]  # fmt: skip
    Transaction(Coordinators(options.kafka), "many-5").init(60_000)  # a newer attempt of task 5
    with pytest.raises(RuntimeError, match="task 5 "):
        commit_transactions(written, options)
    expected = collections.Counter(str(i) for i in range(120) if i // 10 != 5)
    assert consumed(broker.bootstrap, topic, 3, "read_committed") == expected


def test_batch_writes_inside_foreach_batch_are_writes_of_their_own(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """A batch write's tasks carry the micro-batch's query and batch ids (Spark's local
    properties) inside ``foreachBatch``: they must not be taken for the stream sink's
    replay records, or the second of two writes of one micro-batch would be skipped."""
    source, sink = "eos-feb-in", "eos-feb-out"
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    _write(failing_rows(spark, 50, set(), first_attempt_only=True), broker.bootstrap, source)

    def twice(df: Any, _batch_id: int) -> None:
        rows = df.selectExpr("value")
        _write(rows, broker.bootstrap, sink)
        _write(rows, broker.bootstrap, sink)

    query = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.foreachBatch(twice)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    expected = collections.Counter({str(i): 2 for i in range(50)})
    assert consumed(broker.bootstrap, sink, 1, "read_committed") == expected


def test_the_driver_commits_across_a_broker_restart(tmp_path: Path) -> None:
    """The tasks' transactions stay open across a restart of ``seglog serve`` (its
    ``__transaction_state``), and the driver's connections, lost with it, are opened
    again: the commit goes through."""
    proc = start_broker(tmp_path / "data")
    try:
        create_topic(proc.bootstrap, "eos-restart", 2)
        options = WriteOptions.parse(
            {"kafka.bootstrap.servers": proc.bootstrap, "topic": "eos-restart",
             "exactlyOnce": "true"}
        )  # fmt: skip
        written = [write_in_transaction(_rows(range(i * 50, i * 50 + 50)), options, "rs", i)
                   for i in range(2)]  # fmt: skip
        coordinators = Coordinators(options.kafka)
        coordinators.find("rs-0", TRANSACTION)  # a connection to the coordinator, open
        assert proc.stop() == 0
        proc = start_broker(tmp_path / "data", port=proc.port)
        for m in written:
            end_txn(coordinators, m.transactional_id, m.producer_id, m.producer_epoch,
                    commit=True)  # fmt: skip
        coordinators.close()
        expected = collections.Counter(str(i) for i in range(100))
        assert consumed(proc.bootstrap, "eos-restart", 2, "read_committed") == expected
    finally:
        assert proc.stop() == 0, proc.log_text()
