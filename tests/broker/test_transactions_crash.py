"""Exactly-once consume-transform-produce across crashes: kill -9 of the application (its
open transaction is aborted when the next instance fences it) and of the broker (a
transaction cut by the kill is aborted on its timeout, or completed at restart when its
PrepareCommit was written) — read_committed readers of the output see every input record
exactly once, never a half transaction."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import AddOffsetsToTxnRequest, TxnOffsetCommitRequest
from tests._wait import wait_until

from seglog.broker import BrokerProcess, start_broker
from seglog.broker.coordinator.txn_log import encode_txn_key, encode_txn_value
from seglog.broker.coordinator.txn_model import TransactionMetadata, TxnState
from seglog.broker.log.internal_topics import TRANSACTION_STATE_TOPIC, keyed_batch
from seglog.storage import DataDir

from ._txn import add, end, fetch, init, latest, send, stored_values, txn_batch
from ._wire import Wire, ensure_topic

ARGS = ("--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200")
APP = Path(__file__).with_name("_txn_app.py")
N = 400


def output(bootstrap: str, topic: str) -> list[bytes]:
    """Every committed value of ``topic`` partition 0, read to its last stable offset."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True,
    })  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                got.append(m.value())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                return got
        raise AssertionError(f"no end of {topic} within 15 s (read {len(got)})")
    finally:
        c.close()


def offsets_commit(w: Wire, txn_id: str, pid: int, epoch: int, topic: str, offset: int) -> int:
    """AddOffsetsToTxn then TxnOffsetCommit of ``offset`` for group ``kill-g``."""
    added = w.call(AddOffsetsToTxnRequest[3](
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id="kill-g"
    ))  # fmt: skip
    assert added.error_code == 0
    req = TxnOffsetCommitRequest[3]
    part = req.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
        committed_metadata=None,
    )  # fmt: skip
    resp = w.call(req(
        transactional_id=txn_id, group_id="kill-g", producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[req.TxnOffsetCommitRequestTopic(name=topic, partitions=[part])],
    ))  # fmt: skip
    return int(resp.topics[0].partitions[0].error_code)


def stable_offset(w: Wire, topic: str) -> tuple[int, int]:
    """(error code, offset) of group ``kill-g``'s commit, asked with require_stable."""
    req = OffsetFetchRequest[7]
    wanted = req.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])
    part = w.call(req(group_id="kill-g", topics=[wanted], require_stable=True)).topics[0]
    return int(part.partitions[0].error_code), int(part.partitions[0].committed_offset)


class App:
    """The application subprocess, started again whenever it is found dead."""

    def __init__(self, bootstrap: str, source: str, sink: str, log: Path) -> None:
        self.args = [
            sys.executable,
            str(APP),
            bootstrap,
            source,
            sink,
            "ctp-app",
            "ctp-group",
            "0.1",
        ]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def ensure(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
            self.starts += 1

    def committed(self) -> int:
        """The highest source offset the app reported committed (from its log)."""
        done = [
            int(line.rsplit(" ", 1)[1])
            for line in self.log.read_text(errors="replace").splitlines()
            if line.startswith("committed up to ")
        ]
        return max(done, default=0)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.mark.slow
def test_consume_transform_produce_survives_kill9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker: BrokerProcess = start_broker(data, extra_args=ARGS)
    app = App(broker.bootstrap, "ctp-in", "ctp-out", tmp_path / "app.log")
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(N):
            p.produce("ctp-in", value=b"%d" % i, partition=0)
        assert p.flush(30) == 0

        def progressed(count: int) -> bool:
            app.ensure()
            return app.committed() >= count

        app.ensure()
        wait_until(lambda: progressed(N // 4), timeout=90, message="the app made no progress")
        app.kill()  # kill -9 of the application, most likely inside a transaction
        assert app.committed() < N  # killed midway
        wait_until(lambda: progressed(N // 2), timeout=90, message="no progress after kill")
        broker.kill()  # kill -9 of the broker, the app inside a transaction or ending one
        app.kill()
        assert app.committed() < N
        broker = start_broker(data, port=broker.port, extra_args=ARGS)
        wait_until(lambda: progressed(N), timeout=120, message="not every record came out")
        app.kill()
        got = output(broker.bootstrap, "ctp-out")
        counts = Counter(got)
        assert {v: c for v, c in counts.items() if c > 1} == {}  # 0 duplicates
        assert set(got) == {b"out-%d" % i for i in range(N)}  # 0 missing
        assert app.starts >= 3
    finally:
        app.kill()
        code = broker.stop()
        log = broker.log_text()
        assert code in (0, -9), log
        assert "Traceback" not in log, log


def test_open_transaction_across_broker_kill9(tmp_path: Path) -> None:
    """An open transaction (records, pending offsets) cut by kill -9 of the broker is
    aborted, epoch bumped, at the restart (its records were acknowledged before their
    fsync: a crash may have taken some) — never half visible; a committed one before it
    stays committed with its offsets."""
    data = tmp_path / "data"
    broker = start_broker(data, extra_args=ARGS)
    try:
        with Wire(broker.bootstrap) as w:
            ensure_topic(w, "kill-t")
            r = init(w, "kill-tx", timeout_ms=600_000)  # only the restart can abort it
            pid, epoch = r.producer_id, r.producer_epoch
            assert add(w, "kill-tx", pid, epoch, "kill-t") == 0
            assert send(w, "kill-t", txn_batch(pid, epoch, 0, [b"committed"])) == 0
            assert offsets_commit(w, "kill-tx", pid, epoch, "kill-t", 1) == 0
            assert end(w, "kill-tx", pid, epoch, True) == 0
            assert add(w, "kill-tx", pid, epoch, "kill-t") == 0
            assert send(w, "kill-t", txn_batch(pid, epoch, 1, [b"cut"])) == 0
            assert offsets_commit(w, "kill-tx", pid, epoch, "kill-t", 2) == 0
        broker.kill()
        broker = start_broker(data, port=broker.port, extra_args=ARGS)
        with Wire(broker.bootstrap) as w:
            # the ABORT marker at 3, written at start, counted once its fsync is done
            wait_until(lambda: latest(w, "kill-t", 1) == 4, timeout=30, message="not aborted")
            assert stable_offset(w, "kill-t") == (0, 1)
            assert stored_values(fetch(w, "kill-t", 1).records) == [b"committed", b"cut"]
            aborted = fetch(w, "kill-t", 1).aborted_transactions
            assert [(a.producer_id, a.first_offset) for a in aborted] == [(pid, 2)]
            assert init(w, "kill-tx", timeout_ms=3000).producer_epoch == epoch + 2  # fenced
    finally:
        code = broker.stop()
        assert code == 0, broker.log_text()
        assert "Traceback" not in broker.log_text()


def test_stray_open_transaction_aborted_at_start(tmp_path: Path) -> None:
    """A transaction open in a partition that the coordinator's state does not place
    there (as after a power loss took an AddPartitionsToTxn record) is aborted at start:
    read_committed readers are not held back by it and never see it."""
    data = tmp_path / "data"
    broker = start_broker(data, extra_args=ARGS)
    with Wire(broker.bootstrap) as w:
        ensure_topic(w, "stray")
        r = init(w, "known")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "known", pid, epoch, "stray") == 0
        assert send(w, "stray", txn_batch(pid, epoch, 0, [b"kept"])) == 0
        assert end(w, "known", pid, epoch, True) == 0  # offsets 0 and the marker 1
    assert broker.stop() == 0
    with DataDir(data) as topics:
        topics.log("stray", 0).append(txn_batch(pid + 100, 0, 0, [b"stray"]))  # offset 2
    broker = start_broker(data, port=broker.port, extra_args=ARGS)
    try:
        with Wire(broker.bootstrap) as w:
            # the ABORT marker at 3, counted once its fsync is done
            wait_until(lambda: latest(w, "stray", 1) == 4, message="stray not aborted")
            part = fetch(w, "stray", 1)
            assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [
                (pid + 100, 2)
            ]
            assert stored_values(part.records) == [b"kept", b"stray"]  # stray: client filters
    finally:
        assert broker.stop() == 0, broker.log_text()
    assert "aborting producer" in broker.log_text()


def test_prepare_commit_completed_at_start(tmp_path: Path) -> None:
    """A transaction whose PrepareCommit is in ``__transaction_state`` but whose markers
    never were written (a crash between the two) is committed at the next start: its
    records become readable by read_committed and its state CompleteCommit."""
    data = tmp_path / "data"
    broker = start_broker(data, extra_args=ARGS)
    with Wire(broker.bootstrap) as w:
        ensure_topic(w, "prep")
        r = init(w, "prep-tx")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "prep-tx", pid, epoch, "prep") == 0
        assert send(w, "prep", txn_batch(pid, epoch, 0, [b"p1", b"p2"])) == 0
        assert latest(w, "prep", 1) == 0
    assert broker.stop() == 0
    with DataDir(data) as topics:  # the Prepare record a crash left without its markers
        state = topics.log(TRANSACTION_STATE_TOPIC, 0)
        prepared = TransactionMetadata(
            "prep-tx", pid, epoch, 30_000, TxnState.PREPARE_COMMIT, {("prep", 0)},
            start_ms=int(time.time() * 1000), last_update_ms=int(time.time() * 1000),
        )  # fmt: skip
        record = (encode_txn_key("prep-tx"), encode_txn_value(prepared))
        state.append(keyed_batch([record], int(time.time() * 1000)))
    broker = start_broker(data, port=broker.port, extra_args=ARGS)
    try:
        with Wire(broker.bootstrap) as w:
            wait_until(lambda: latest(w, "prep", 1) == 3, message="not completed at start")
            assert stored_values(fetch(w, "prep", 1).records) == [b"p1", b"p2"]
            assert fetch(w, "prep", 1).aborted_transactions == []
            described = w.call(DescribeTransactionsRequest[0](transactional_ids=["prep-tx"]))
            assert described.transaction_states[0].transaction_state == "CompleteCommit"
    finally:
        assert broker.stop() == 0, broker.log_text()
    assert "completing transaction of 'prep-tx' found in PrepareCommit" in broker.log_text()


def _describe(bootstrap: str, txn_id: str) -> str:
    with Wire(bootstrap) as w:
        resp = w.call(DescribeTransactionsRequest[0](transactional_ids=[txn_id]))
        return str(resp.transaction_states[0].transaction_state)


def test_ongoing_transaction_aborted_after_broker_kill9(tmp_path: Path) -> None:
    """Produce answers transactional records before their fsync, so a transaction Ongoing
    at a kill -9 of the broker is aborted at the restart, epoch bumped: its producer's
    commit is fenced, read_committed readers see none of its records, and the same
    transactional id, initialised again, commits a new transaction."""
    data = tmp_path / "data"
    broker = start_broker(data, extra_args=ARGS)
    conf = {"transactional.id": "cut-tx", "transaction.timeout.ms": 600_000}
    try:
        with Wire(broker.bootstrap) as w:
            ensure_topic(w, "cut")
        p = Producer({"bootstrap.servers": broker.bootstrap, **conf})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(20):
            p.produce("cut", value=b"lost-%d" % i, partition=0)
        assert p.flush(30) == 0  # every record acknowledged
        assert _describe(broker.bootstrap, "cut-tx") == "Ongoing"
        broker.kill()
        broker = start_broker(data, port=broker.port, extra_args=ARGS)
        assert _describe(broker.bootstrap, "cut-tx") == "CompleteAbort"
        with pytest.raises(KafkaException) as failed:
            p.commit_transaction(30)
        error = failed.value.args[0]
        assert error.fatal() or error.txn_requires_abort(), error
        fenced = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
        assert error.code() in fenced, error
        again = Producer({"bootstrap.servers": broker.bootstrap, **conf})
        again.init_transactions(30)
        again.begin_transaction()
        again.produce("cut", value=b"kept", partition=0)
        again.commit_transaction(30)
        assert output(broker.bootstrap, "cut") == [b"kept"]
        assert _describe(broker.bootstrap, "cut-tx") == "CompleteCommit"
    finally:
        code = broker.stop()
        assert code == 0, broker.log_text()
        assert "Traceback" not in broker.log_text()
    assert "ongoing at a crash" in broker.log_text()


def test_ongoing_transaction_kept_across_clean_restart(tmp_path: Path) -> None:
    """A clean shutdown fsyncs every partition: a transaction Ongoing across it is kept
    (not fenced) and its producer commits it after the restart."""
    data = tmp_path / "data"
    broker = start_broker(data, extra_args=ARGS)
    try:
        with Wire(broker.bootstrap) as w:
            ensure_topic(w, "clean")
            r = init(w, "clean-tx", timeout_ms=600_000)
            pid, epoch = r.producer_id, r.producer_epoch
            assert add(w, "clean-tx", pid, epoch, "clean") == 0
            assert send(w, "clean", txn_batch(pid, epoch, 0, [b"a", b"b"])) == 0
        assert broker.stop() == 0
        broker = start_broker(data, port=broker.port, extra_args=ARGS)
        assert _describe(broker.bootstrap, "clean-tx") == "Ongoing"
        with Wire(broker.bootstrap) as w:
            assert end(w, "clean-tx", pid, epoch, True) == 0
        assert output(broker.bootstrap, "clean") == [b"a", b"b"]
    finally:
        assert broker.stop() == 0, broker.log_text()
