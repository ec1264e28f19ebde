"""Transactions on a log: ongoing transactions, the last stable offset, ABORT markers in
Kafka's ``.txnindex`` layout, read_committed reads, and their recovery at open."""

from __future__ import annotations

import os
import struct

import crc32c
import pytest

from seglog.errors import CorruptRecordError, InvalidRecordError, NotFoundError
from seglog.storage import (
    OFFSET_NEWEST,
    OFFSET_OLDEST,
    Log,
    backup,
    check,
    delete_offsets,
    encode_control_batch,
    open_log,
    recover,
    restore,
    snapshot,
    trim_by_offset,
)

from ._batches import make_batch, txn_batch


def _marker(pid: int, *, commit: bool, epoch: int = 0) -> bytes:
    return encode_control_batch(pid, epoch, commit=commit, coordinator_epoch=3, timestamp_ms=1)


def _end(log: Log, pid: int, *, commit: bool) -> int:
    return log.append(_marker(pid, commit=commit), origin="coordinator").base_offset


def _txnindex(path, base: int = 0) -> list[tuple[int, ...]]:
    data = (path / f"{base:020d}.txnindex").read_bytes()
    assert len(data) % 34 == 0
    return [struct.unpack(">hqqqq", data[i : i + 34]) for i in range(0, len(data), 34)]


def test_lso_and_txnindex_layout(tmp_path):
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(make_batch(2))  # 0-1
        log.append(txn_batch(7, 3))  # 2-4
        log.append(txn_batch(8, 2))  # 5-6
        assert log.ongoing_transactions() == {7: 2, 8: 5}
        assert log.last_stable_offset == 2
        assert log.high_watermark == 7
        log.append(txn_batch(7, 1))  # 7: extends 7's transaction
        assert _end(log, 7, commit=False) == 8
        assert log.ongoing_transactions() == {8: 5}
        assert log.last_stable_offset == 5
        assert _end(log, 8, commit=True) == 9
        assert log.last_stable_offset == log.high_watermark == 10
        log.append(txn_batch(9, 2))  # 10-11
        assert _end(log, 9, commit=False) == 12
        # Kafka's AbortedTxn: version, producerId, firstOffset, lastOffset (the marker),
        # lastStableOffset once the marker is written
        assert _txnindex(tmp_path / "p") == [(0, 7, 2, 8, 5), (0, 9, 10, 12, 13)]
        assert log.aborted_transactions(0, 100) == [(7, 2), (9, 10)]
        assert log.aborted_transactions(9, 100) == [(9, 10)]
        assert log.aborted_transactions(0, 2) == []
        assert log.aborted_transactions(0, 3) == [(7, 2)]


def test_read_committed_consume(tmp_path):
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(make_batch(2, tag=b"plain"))  # 0-1
        log.append(txn_batch(7, 3, tag=b"abort"))  # 2-4
        log.append(txn_batch(8, 2, tag=b"commit"))  # 5-6
        log.append(make_batch(1, tag=b"plain2"))  # 7
        nxt, msgs = log.consume(OFFSET_OLDEST, 100, isolation_level="read_committed")
        assert (nxt, [m.offset for m in msgs]) == (2, [0, 1])
        assert log.consume(OFFSET_NEWEST, 1, isolation_level="read_committed") == (2, [])
        _end(log, 7, commit=False)  # 8
        nxt, msgs = log.consume(2, 100, isolation_level="read_committed")
        assert (nxt, msgs) == (5, [])
        _end(log, 8, commit=True)  # 9
        nxt, msgs = log.consume(OFFSET_OLDEST, 100, isolation_level="read_committed")
        assert [m.offset for m in msgs] == [0, 1, 5, 6, 7]
        assert nxt == 10
        nxt, msgs = log.consume(OFFSET_OLDEST, 100)
        assert [m.offset for m in msgs] == [0, 1, 2, 3, 4, 5, 6, 7]  # no markers
        assert nxt == 10
        cols = log.consume_columns(3, 100, isolation_level="read_committed")
        assert cols.offsets.tolist() == [5, 6, 7]
        with pytest.raises(ValueError, match="isolation_level"):
            log.consume(0, 1, isolation_level="read_dirty")  # type: ignore[arg-type]


def test_consume_blocking_read_committed_waits_for_the_marker(tmp_path):
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(txn_batch(7, 2))
        assert log.consume_blocking(0, 10, 0.05, isolation_level="read_committed") == (0, [])
        _end(log, 7, commit=True)
        nxt, msgs = log.consume_blocking(0, 10, 5, isolation_level="read_committed")
        assert [m.offset for m in msgs] == [0, 1]
        assert nxt == 3


def test_control_batches_only_from_the_coordinator(tmp_path):
    with open_log(tmp_path / "p", create=True) as log:
        with pytest.raises(InvalidRecordError):
            log.append(_marker(7, commit=True))
        broken = bytearray(_marker(7, commit=True))
        broken[61 + 6] = 5  # ControlRecordType 5: unknown
        broken[17:21] = struct.pack(">I", crc32c.crc32c(bytes(broken[21:])))
        with pytest.raises(CorruptRecordError):
            log.append(bytes(broken), origin="coordinator")
        assert log.log_end_offset == 0


def test_get_of_a_marker_offset_is_not_found(tmp_path):
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(txn_batch(7, 1))
        _end(log, 7, commit=True)
        assert log.get(0).offset == 0
        with pytest.raises(NotFoundError):
            log.get(1)


def test_reopen_keeps_transactions(tmp_path):
    d = tmp_path / "p"
    with open_log(d, create=True, flush_messages=1, segment_bytes=300) as log:
        for i in range(6):
            log.append(txn_batch(i, 2))
        for i in range(0, 6, 2):
            _end(log, i, commit=False)
        before = (log.ongoing_transactions(), log.aborted_transactions(0, 1000))
        lso = log.last_stable_offset
    assert (d / "transaction-state").exists()
    with open_log(d) as log:
        assert (log.ongoing_transactions(), log.aborted_transactions(0, 1000)) == before
        assert log.last_stable_offset == lso


def test_crash_recovery_replays_after_the_snapshot(tmp_path):
    """No clean close: the snapshot of the last roll plus a replay of the active segment
    give the same state; a torn tail cuts an ABORT marker and its .txnindex entry."""
    d = tmp_path / "p"
    log = open_log(d, create=True, flush_messages=1, segment_bytes=400)
    for i in range(5):
        log.append(txn_batch(i, 2))
    _end(log, 0, commit=False)
    _end(log, 1, commit=True)
    want = (log.ongoing_transactions(), log.aborted_transactions(0, 1000))
    last = log.segments()[-1].base_offset
    marker_at = _end(log, 2, commit=False)
    log.sync()
    log._state.group_commit.close()  # type: ignore[union-attr]  (simulated crash: no close)
    os.close(log._state.lock_fd)  # type: ignore[arg-type]
    seg = d / f"{last:020d}.log"
    os.truncate(seg, os.path.getsize(seg) - 10)  # tear the last marker
    with open_log(d) as log2:
        assert log2.log_end_offset == marker_at
        assert (log2.ongoing_transactions(), log2.aborted_transactions(0, 1000)) == want
    # the snapshot lost (or past the end): a full replay gives the same state
    with open_log(d) as log3:
        pass
    (d / "transaction-state").unlink()
    (d / ".clean_shutdown").unlink()
    with open_log(d) as log3:
        assert (log3.ongoing_transactions(), log3.aborted_transactions(0, 1000)) == want


def test_subscription_read_committed(tmp_path):
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(make_batch(1))  # 0
        log.append(txn_batch(7, 2))  # 1-2
        log.append(txn_batch(8, 2))  # 3-4
        committed = log.subscribe("c", isolation_level="read_committed")
        plain = log.subscribe("u")
        assert [d.message.offset for d in committed.fetch_now(10)] == [0]
        assert committed.fetch_offsets_now(10) == []
        _end(log, 7, commit=False)  # 5
        _end(log, 8, commit=True)  # 6
        assert committed.fetch_offsets_now(10) == [(3, 0), (4, 0)]
        assert committed.position == 7
        assert [d.message.offset for d in plain.fetch_now(10)] == [0, 1, 2, 3, 4]
        assert (
            log.subscribe("n", start=OFFSET_NEWEST, isolation_level="read_committed").position == 7
        )
        with pytest.raises(ValueError, match="other settings"):
            log.subscribe("c")


def test_subscription_read_committed_wakes_on_the_marker(tmp_path):
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(txn_batch(7, 2))
        sub = log.subscribe("c", isolation_level="read_committed")
        assert sub.fetch(10, 0.05) == []
        fut = sub.wake_future()
        assert not fut.done()  # held at the LSO: no busy wake-up
        _end(log, 7, commit=True)
        fut.result(timeout=5)
        assert [d.message.offset for d in sub.fetch(10, 5)] == [0, 1]
        fut.cancel()


def test_read_only_reader_follows_the_writer(tmp_path):
    d = tmp_path / "p"
    with open_log(d, create=True, flush_messages=1, segment_bytes=300) as log:
        log.append(txn_batch(7, 2))
        with Log.open(d, read_only=True) as reader:
            assert reader.last_stable_offset == 0
            for i in range(4):
                log.append(txn_batch(10 + i, 2))
            _end(log, 7, commit=False)
            reader.refresh()
            assert reader.ongoing_transactions() == log.ongoing_transactions()
            assert reader.aborted_transactions(0, 100) == log.aborted_transactions(0, 100)
            assert reader.last_stable_offset == log.last_stable_offset == 2


def test_check_backup_restore_carry_the_txnindex(tmp_path):
    d = tmp_path / "p"
    with open_log(d, create=True, flush_messages=1, segment_bytes=300) as log:
        for i in range(4):
            log.append(txn_batch(i, 2))
            _end(log, i, commit=i % 2 == 1)
        log.append(txn_batch(9, 1))
        want = (log.aborted_transactions(0, 100), log.ongoing_transactions())
        backup(log, tmp_path / "b")
        snapshot(log, tmp_path / "s.tar")
    (report,) = check(d)
    assert report.ok
    assert report.index_problems == []
    restore(tmp_path / "s.tar", tmp_path / "r")
    for copy in (tmp_path / "b", tmp_path / "r"):
        assert sorted(p.name for p in copy.glob("*.txnindex")) == sorted(
            p.name for p in d.glob("*.txnindex")
        )
        with open_log(copy) as log:
            assert (log.aborted_transactions(0, 100), log.ongoing_transactions()) == want
    # a damaged .txnindex: check reports it, the next open rebuilds it
    (idx,) = [p for p in d.glob("*.txnindex") if p.stat().st_size][:1]
    idx.write_bytes(idx.read_bytes()[:-3])
    (report,) = check(d)
    assert report.index_problems
    with open_log(d) as log:
        assert (log.aborted_transactions(0, 100), log.ongoing_transactions()) == want
    (report,) = check(d)
    assert report.index_problems == []


def test_trims_and_delete_offsets_keep_the_lso(tmp_path):
    with open_log(tmp_path / "p", create=True, segment_messages=2) as log:
        log.append(txn_batch(7, 2))  # 0-1: ongoing
        log.append(txn_batch(8, 2))  # 2-3
        marker = _end(log, 8, commit=False)  # 4
        for i in range(3):
            log.append(make_batch(2, tag=b"%d" % i))  # 5-10
        log.sync()
        assert log.last_stable_offset == 0
        # a marker is not a record: delete_offsets leaves it (and the transaction) alone
        assert delete_offsets(log, [marker]).offsets == []
        assert delete_offsets(log, [1]).offsets == [1]
        assert log.last_stable_offset == 0
        assert log.aborted_transactions(0, 100) == [(8, 2)]
        trim_by_offset(log, 4)
        assert log.log_start_offset == 4
        assert log.last_stable_offset == 4  # the ongoing transaction's start, clamped
        assert log.consume(OFFSET_OLDEST, 100, isolation_level="read_committed") == (4, [])
        _end(log, 7, commit=True)
        log.sync()
        assert log.last_stable_offset == log.high_watermark == 12
        _, msgs = log.consume(OFFSET_OLDEST, 100, isolation_level="read_committed")
        assert [m.offset for m in msgs] == list(range(5, 11))


def test_adopted_transactional_batches_start_transactions(tmp_path):
    staged = tmp_path / "staged.log"
    staged.write_bytes(txn_batch(7, 2) + make_batch(1) + txn_batch(8, 1))
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(make_batch(2))
        log.adopt(staged)
        assert log.ongoing_transactions() == {7: 2, 8: 5}
        assert log.last_stable_offset == 2
        _end(log, 7, commit=True)
        _end(log, 8, commit=False)
        _, msgs = log.consume(OFFSET_OLDEST, 100, isolation_level="read_committed")
        assert [m.offset for m in msgs] == [0, 1, 2, 3, 4]


def test_consume_by_key_read_committed(tmp_path):
    with open_log(tmp_path / "p", create=True, key_index=True, flush_messages=1) as log:
        log.append(txn_batch(7, 2, key_prefix=b"k"))  # 0-1: k0, k1 (aborted)
        log.append(txn_batch(8, 2, key_prefix=b"k"))  # 2-3: k0, k1 (committed)
        log.append(txn_batch(9, 1, key_prefix=b"k"))  # 4: k0 (ongoing)
        _end(log, 7, commit=False)  # 5
        _end(log, 8, commit=True)  # 6
        _, msgs = log.consume_by_key(b"k0", OFFSET_OLDEST, 10, isolation_level="read_committed")
        assert [m.offset for m in msgs] == [2]
        _, msgs = log.consume_by_key(b"k0", OFFSET_OLDEST, 10)
        assert [m.offset for m in msgs] == [0, 2, 4]


def test_retention_removes_the_txnindex_with_its_segment(tmp_path):
    d = tmp_path / "p"
    with open_log(d, create=True, segment_messages=2) as log:
        log.append(txn_batch(7, 2))  # 0-1
        _end(log, 7, commit=False)  # 2: segment 2
        for i in range(3):
            log.append(make_batch(2, tag=b"%d" % i))  # 3-8
        log.sync()
        assert (d / f"{2:020d}.txnindex").exists()
        trim_by_offset(log, 4)
        assert not (d / f"{2:020d}.txnindex").exists()
        assert not list(d.glob("*.txnindex.deleted"))
        assert log.aborted_transactions(0, 100) == []


def test_recover_rebuilds_the_transaction_state(tmp_path):
    d = tmp_path / "p"
    with open_log(d, create=True, flush_messages=1, segment_bytes=300) as log:
        for i in range(4):
            log.append(txn_batch(i, 2))
        _end(log, 0, commit=False)
        _end(log, 1, commit=True)
        want = (log.ongoing_transactions(), log.aborted_transactions(0, 100))
        last_marker = _end(log, 2, commit=False)
        tail = log.segments()[-1].base_offset
    (d / "transaction-state").unlink()
    seg = d / f"{tail:020d}.log"
    os.truncate(seg, os.path.getsize(seg) - 5)  # tear the last marker
    (report,) = recover(d)
    assert report.log_end_offset == last_marker
    with open_log(d) as log:
        assert (log.ongoing_transactions(), log.aborted_transactions(0, 100)) == want
    (report,) = check(d)
    assert report.index_problems == []
