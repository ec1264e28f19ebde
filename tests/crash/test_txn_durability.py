"""A transaction's records and the fsync, on a filesystem whose fsyncs the test controls
(the lazy FUSE filesystem, ``_lazyfs.py``), with ``seglog serve`` and the wire:

- Produce answers transactional batches before their fsync (the high watermark, which
  follows the durable end, is still below them when the answer arrives);
- EndTxn(commit) writes PrepareCommit only once the records are durable: while their
  fsync is slow, the commit is in flight and the transaction still Ongoing;
- records that cannot be made durable (fsync EIO takes the partition offline) are never
  committed: the commit aborts the transaction and answers the storage error.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest
from tests._wait import wait_until
from tests.broker._txn import (
    CONCURRENT_TRANSACTIONS,
    PRODUCER_FENCED,
    add,
    end,
    fetch,
    init,
    latest,
    send,
    stored_values,
    txn_batch,
)
from tests.broker._wire import Wire, ensure_topic, produce

from seglog.broker import BrokerProcess, start_broker

from ._mounts import LazyMount, lazy_mount

SLOW_S = 6.0  # the slow partition's fsync: long enough to look at the broker meanwhile
KAFKA_STORAGE_ERROR = 56


@pytest.fixture
def slow_disk(tmp_path: Path) -> Iterator[tuple[LazyMount, BrokerProcess]]:
    """A broker whose data directory is on the lazy filesystem (served in parallel, so
    one partition's fsync can be slow while everything else answers)."""
    with lazy_mount(tmp_path / "mnt", threads=True) as fs:
        broker = start_broker(fs.path / "data", log_path=tmp_path / "broker.log")
        try:
            yield fs, broker
        finally:
            fs.control("fsync_delay 0 -")
            broker.stop()
            assert "Traceback" not in broker.log_text(), broker.log_text()


def _state(w: Wire, txn_id: str) -> str:
    resp = w.call(DescribeTransactionsRequest[0](transactional_ids=[txn_id]))
    return str(resp.transaction_states[0].transaction_state)


def _begin(w: Wire, txn_id: str, topic: str) -> tuple[int, int]:
    ensure_topic(w, topic)
    r = init(w, txn_id)
    assert r.error_code == 0
    assert add(w, txn_id, r.producer_id, r.producer_epoch, topic) == 0
    return r.producer_id, r.producer_epoch


def test_transactional_produce_answered_before_its_fsync(
    slow_disk: tuple[LazyMount, BrokerProcess],
) -> None:
    fs, broker = slow_disk
    with Wire(broker.bootstrap) as w:
        pid, epoch = _begin(w, "early", "early")
        assert latest(w, "early", 0) == 0
        fs.control(f"fsync_delay {SLOW_S} /early-0/")
        assert send(w, "early", txn_batch(pid, epoch, 0, [b"a", b"b", b"c"])) == 0
        # answered, and the fsync is not done: the high watermark has not moved yet
        assert latest(w, "early", 0) == 0
        wait_until(lambda: latest(w, "early", 0) == 3, timeout=30, message="never durable")


def test_transactional_produce_waits_for_its_ongoing_record(
    slow_disk: tuple[LazyMount, BrokerProcess],
) -> None:
    """The one thing a transactional produce waits for: the ``__transaction_state`` record
    that put its partition in the transaction (AddPartitionsToTxn is answered before its
    fsync), so that no restart forgets a transaction with acknowledged records."""
    fs, broker = slow_disk
    with Wire(broker.bootstrap) as w, Wire(broker.bootstrap) as watcher:
        ensure_topic(w, "gate")
        r = init(w, "gate")
        pid, epoch = r.producer_id, r.producer_epoch
        fs.control(f"fsync_delay {SLOW_S} /__transaction_state-0/")
        assert add(w, "gate", pid, epoch, "gate") == 0  # answered, its fsync slow
        sent: list[int] = []
        produce = threading.Thread(
            target=lambda: sent.append(send(w, "gate", txn_batch(pid, epoch, 0, [b"g"])))
        )
        produce.start()
        try:
            # appended (the partition holds the transaction open) but not answered
            wait_until(
                lambda: latest(watcher, "gate", 0) == 1, timeout=SLOW_S / 2, message="append"
            )
            assert sent == []
        finally:
            fs.control("fsync_delay 0 -")
            produce.join(30)
        assert sent == [0]


def test_commit_waits_until_the_records_are_durable(
    slow_disk: tuple[LazyMount, BrokerProcess],
) -> None:
    fs, broker = slow_disk
    with Wire(broker.bootstrap) as w, Wire(broker.bootstrap) as watcher:
        pid, epoch = _begin(w, "late", "late")
        fs.control(f"fsync_delay {SLOW_S} /late-0/")
        assert send(w, "late", txn_batch(pid, epoch, 0, [b"x", b"y"])) == 0
        ended: list[int] = []
        commit = threading.Thread(target=lambda: ended.append(end(w, "late", pid, epoch, True)))
        commit.start()
        try:
            # the commit is in flight (the id is busy) ...
            wait_until(
                lambda: add(watcher, "late", pid, epoch, "late") == CONCURRENT_TRANSACTIONS,
                timeout=SLOW_S / 2,
                message="EndTxn never seen in flight",
            )
            # ... and waits for the records' fsync: no PrepareCommit yet, nothing durable
            assert _state(watcher, "late") == "Ongoing"
            assert latest(watcher, "late", 0) == 0
            assert ended == []
        finally:
            fs.control("fsync_delay 0 -")
            commit.join(30)
        assert ended == [0]
        assert latest(watcher, "late", 0) >= 2  # answered once the records were durable
        assert _state(watcher, "late") == "CompleteCommit"


def test_commit_of_records_lost_to_an_fsync_error_aborts(
    slow_disk: tuple[LazyMount, BrokerProcess],
) -> None:
    fs, broker = slow_disk
    with Wire(broker.bootstrap) as w:
        pid, epoch = _begin(w, "eio", "eio")
        assert produce(w, "eio", [b"durable"]) == 0  # acks=all: the topic's files synced
        fs.control("fsync_eio 1")  # the next fsync: the transaction's records
        assert send(w, "eio", txn_batch(pid, epoch, 0, [b"gone"])) == 0  # before the fsync
        wait_until(lambda: fs.counters()["fsync_eio"] == 1, message="no fsync error")
        assert end(w, "eio", pid, epoch, True) == KAFKA_STORAGE_ERROR
        # never PrepareCommit: aborted (its ABORT marker waits for the partition to return)
        assert _state(w, "eio") in ("PrepareAbort", "CompleteAbort")
        assert end(w, "eio", pid, epoch, True) != 0  # a retried commit never succeeds
    assert "records not durable" in broker.log_text()


def test_power_loss_keeps_committed_and_aborts_ongoing(tmp_path: Path) -> None:
    """Power loss (everything not fsynced is gone) with one transaction committed and the
    next one Ongoing with acknowledged records: after the restart the committed one is
    whole, the Ongoing one is aborted and its producer fenced (EndTxn 90), never told
    that a transaction with lost records committed."""
    with lazy_mount(tmp_path / "mnt") as fs:
        data = fs.path / "data"
        data.mkdir()  # made durable, as a data directory made ahead is
        fd = os.open(fs.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        broker = start_broker(data, log_path=tmp_path / "broker.log")
        try:
            with Wire(broker.bootstrap) as w:
                pid, epoch = _begin(w, "pl", "pl")
                assert send(w, "pl", txn_batch(pid, epoch, 0, [b"c1", b"c2", b"c3"])) == 0
                assert end(w, "pl", pid, epoch, True) == 0  # committed: offsets 0-2, marker 3
                assert add(w, "pl", pid, epoch, "pl") == 0
                assert send(w, "pl", txn_batch(pid, epoch, 3, [b"o1", b"o2"])) == 0
            broker.kill()
            fs.power_loss()
            broker = start_broker(data, port=broker.port, log_path=tmp_path / "broker2.log")
            with Wire(broker.bootstrap) as w:
                assert _state(w, "pl") == "CompleteAbort"
                assert end(w, "pl", pid, epoch, True) == PRODUCER_FENCED
                wait_until(lambda: latest(w, "pl", 1) == latest(w, "pl", 0), message="open")
                assert stored_values(fetch(w, "pl", 1).records)[:3] == [b"c1", b"c2", b"c3"]
                assert [a.producer_id for a in fetch(w, "pl", 1).aborted_transactions] == [pid]
        finally:
            broker.stop()
            assert "Traceback" not in broker.log_text(), broker.log_text()
