"""Transactions over tiered history: the ``.txnindex`` of segments uploaded to the tier and
removed locally is read back from the tier (Kafka's RemoteLogManager remote transaction
index lookup): ``aborted_transactions``, read_committed ``consume`` / ``consume_columns``
below the local log start, and the transaction state after reopening a log whose oldest
segments exist only in the tier. Against a ``file://`` tier."""

from __future__ import annotations

import os
import pathlib

import crc32c
import pytest

from seglog.errors import NotFoundError
from seglog.storage import (
    OFFSET_OLDEST,
    Log,
    LogConfig,
    RemoteCorruptionError,
    RemoteStorage,
    RemoteTier,
    tier_sync,
)

from ._batches import make_batch, txn_batch
from ._tier_txns import PER_SEGMENT, end_txn, write_transactions


def _remote(tmp_path: pathlib.Path) -> RemoteStorage:
    return RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(tmp_path / "cache"))


def _open(path: pathlib.Path, remote: RemoteStorage | None) -> Log:
    config = LogConfig(
        segment_messages=PER_SEGMENT,
        remote_storage_enable=remote is not None,
        local_retention_bytes=0,
    )
    return Log.open(path, config, create=True, remote=remote)


def _tier(log: Log) -> None:
    log.sync()  # the high watermark (uploads stay below it and the LSO)
    report = tier_sync(log)
    assert report.error is None
    assert report.deleted_local
    assert log.local_log_start_offset >= 3 * PER_SEGMENT  # the transactions are remote
    assert not list(log.directory.glob(f"{0:020d}.*"))  # .txnindex went with the segment
    tier = log.remote_tier
    assert tier is not None
    assert "txnindex" in tier.manifest.segments[0].objects


def test_aborted_transactions_from_the_tier(tmp_path: pathlib.Path) -> None:
    with _open(tmp_path / "t-0", _remote(tmp_path)) as log:
        _, aborted = write_transactions(log)
        before = log.aborted_transactions(0, 1000)
        _tier(log)
        assert before == aborted
        assert log.aborted_transactions(0, 1000) == aborted
        assert log.aborted_transactions(0, 9) == [(1, 0)]
        assert log.aborted_transactions(8, 15) == [(3, 9), (4, 14)]
        assert log.aborted_transactions(17, 1000) == [(3, 9), aborted[3]]  # marker >= 17
        # producer 6: first offset remote, its marker (and .txnindex entry) local only
        assert log.local_log_start_offset == log.segments()[-1].base_offset  # the active one
        assert aborted[3][1] < log.local_log_start_offset
        tier = log.remote_tier
        assert tier is not None
        local = log.local_log_start_offset
        assert tier.aborted_transactions(0, 1000, local) == aborted[:3]
        assert tier.aborted_transactions(0, 1000) == aborted[:3]
        assert tier.aborted_transactions(0, 5, 9) == [(1, 0)]  # below offset 9 only
        # a fresh tier reads .txnindex objects only until an entry's LSO reaches the end
        fresh = RemoteTier.open(log.directory, None, writer=False)
        assert fresh is not None
        assert fresh.aborted_transactions(0, 5, local) == [(1, 0)]
        assert len(fresh._aborted) == 2  # of 3 remote segments with a .txnindex
        assert fresh.aborted_transactions(0, 1000, local) == aborted[:3]
        assert len(fresh._aborted) == 3


def test_read_committed_consume_over_tiered_history(tmp_path: pathlib.Path) -> None:
    with _open(tmp_path / "t-0", _remote(tmp_path)) as log:
        visible, _ = write_transactions(log)
        _tier(log)
        assert log.last_stable_offset == log.high_watermark
        nxt, msgs = log.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        assert [m.offset for m in msgs] == visible
        assert nxt == log.log_end_offset
        assert all(not m.value.startswith(b"abort") for m in msgs)
        nxt, msgs = log.consume(1, 1000, isolation_level="read_committed")
        assert [m.offset for m in msgs] == visible
        cols = log.consume_columns(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        assert cols.offsets.tolist() == visible
        cols = log.consume_columns(10, 5, isolation_level="read_committed")
        assert cols.offsets.tolist() == [11, 12, 13, 17, 18]
        sub = log.subscribe("c", start=OFFSET_OLDEST, isolation_level="read_committed")
        got: list[int] = []
        while batch := sub.fetch_now(25):
            got += [d.message.offset for d in batch]
            sub.ack([d.message.offset for d in batch])
        assert got == visible
        # read_uncommitted still sees the aborted records
        _, msgs = log.consume(OFFSET_OLDEST, 1000)
        assert [m.offset for m in msgs][:3] == [0, 1, 2]


def test_same_records_as_an_untiered_log(tmp_path: pathlib.Path) -> None:
    with (
        _open(tmp_path / "plain-0", None) as ref,
        _open(tmp_path / "t-0", _remote(tmp_path)) as log,
    ):
        write_transactions(ref)
        write_transactions(log)
        _tier(log)
        for start in (OFFSET_OLDEST, 2, 9, 15, 25):
            want = ref.consume(start, 1000, isolation_level="read_committed")
            got = log.consume(start, 1000, isolation_level="read_committed")
            assert [(m.offset, m.value) for m in got[1]] == [(m.offset, m.value) for m in want[1]]
            assert got[0] == want[0]


def test_reopen_after_local_deletion(tmp_path: pathlib.Path) -> None:
    """The transaction state survives the oldest segments living only in the tier: an
    ongoing transaction (segments from its first offset on stay local: uploads stop at
    the LSO, as Kafka's) keeps the LSO after reopening; once aborted and tiered, its
    records are dropped by read_committed readers, after reopening too."""
    remote = _remote(tmp_path)
    path = tmp_path / "t-0"
    with _open(path, remote) as log:
        visible, aborted = write_transactions(log)
        first5 = log.append(txn_batch(5, 2, tag=b"abort")).base_offset
        while log.log_end_offset < 9 * PER_SEGMENT:
            log.append(make_batch(2, tag=b"plain"))
        _tier(log)
        assert log.local_log_start_offset <= first5
        assert log.ongoing_transactions() == {5: first5}
        assert log.last_stable_offset == first5
    with _open(path, remote) as log:
        assert log.local_log_start_offset >= 3 * PER_SEGMENT
        assert log.ongoing_transactions() == {5: first5}
        assert log.last_stable_offset == first5
        assert log.aborted_transactions(0, 1000) == aborted
        nxt, msgs = log.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        assert (nxt, [m.offset for m in msgs]) == (first5, visible)
        end_txn(log, 5, commit=False)
        while log.log_end_offset < 12 * PER_SEGMENT:
            log.append(make_batch(2, tag=b"plain"))
        log.sync()
        assert log.last_stable_offset == log.high_watermark
        assert tier_sync(log).error is None
        assert log.local_log_start_offset > first5 + 2  # pid 5's records are remote now
    aborted.append((5, first5))
    with _open(path, remote) as log:
        assert log.ongoing_transactions() == {}
        assert log.last_stable_offset == log.high_watermark
        assert log.aborted_transactions(0, 1000) == aborted
        _, msgs = log.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        offsets = [m.offset for m in msgs]
        assert offsets[: len(visible)] == visible
        assert first5 not in offsets
        assert first5 + 1 not in offsets
        assert all(not m.value.startswith(b"abort") for m in msgs)
        cols = log.consume_columns(first5 - 1, 1000, isolation_level="read_committed")
        assert first5 not in cols.offsets.tolist()
        assert len(cols) > 0
    with Log.open(path, read_only=True) as reader:  # a reader process: the manifest copy
        assert reader.aborted_transactions(0, 1000) == aborted
        _, msgs = reader.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        assert [m.offset for m in msgs] == offsets


def test_corrupt_remote_txnindex_is_not_served(tmp_path: pathlib.Path) -> None:
    with _open(tmp_path / "t-0", _remote(tmp_path)) as log:
        write_transactions(log)
        _tier(log)
        tier = log.remote_tier
        assert tier is not None
        obj = tier.manifest.segments[0].objects["txnindex"]
        where = tmp_path / "tier" / obj.key
        blob = bytearray(where.read_bytes())
        blob[obj.offset + 3] ^= 0xFF
        where.write_bytes(bytes(blob))
        assert crc32c.crc32c(bytes(blob[obj.offset : obj.offset + obj.size])) != obj.crc32c
        with pytest.raises(RemoteCorruptionError, match="txnindex"):
            log.aborted_transactions(0, 1000)
        with pytest.raises(RemoteCorruptionError):
            log.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")


def test_reopen_after_a_crash_past_local_deletion(tmp_path: pathlib.Path) -> None:
    """No clean close after the oldest segments were tiered: the snapshot of the last roll
    and a replay of the local segments give the same transaction state."""
    remote = _remote(tmp_path)
    path = tmp_path / "t-0"
    log = _open(path, remote)
    visible, aborted = write_transactions(log)
    first5 = log.append(txn_batch(5, 2, tag=b"abort")).base_offset
    log.append(make_batch(2, tag=b"plain"))
    _tier(log)
    log.sync()
    log._state.group_commit.close()  # type: ignore[union-attr]  (simulated crash: no close)
    os.close(log._state.lock_fd)  # type: ignore[arg-type]
    with _open(path, remote) as log2:
        assert log2.local_log_start_offset >= 3 * PER_SEGMENT
        assert log2.ongoing_transactions() == {5: first5}
        assert log2.last_stable_offset == first5
        assert log2.aborted_transactions(0, 1000) == aborted
        nxt, msgs = log2.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        assert (nxt, [m.offset for m in msgs]) == (first5, visible)


def test_point_reads_over_tiered_history(tmp_path: pathlib.Path) -> None:
    """read_committed ``get``, by key and by time below the local log start: aborted
    records and markers come from segments (and ``.txnindex`` objects) in the tier."""
    config = LogConfig(
        segment_messages=PER_SEGMENT,
        remote_storage_enable=True,
        local_retention_bytes=0,
        key_index=True,
    )
    with Log.open(tmp_path / "t-0", config, create=True, remote=_remote(tmp_path)) as log:
        visible, _ = write_transactions(log)
        _tier(log)
        for off in range(log.log_end_offset):
            if off in visible:
                assert log.get(off, isolation_level="read_committed").offset == off
            else:  # aborted, or a marker
                with pytest.raises(NotFoundError):
                    log.get(off, isolation_level="read_committed")
        assert log.get(0).value.startswith(b"abort")  # type: ignore[union-attr]
        _, msgs = log.consume(OFFSET_OLDEST, 1000, isolation_level="read_committed")
        last = {m.key: m.offset for m in msgs}
        for key, off in last.items():
            assert key is not None
            assert log.offset_by_key(key, isolation_level="read_committed") == off
        assert log.offset_by_time(0, isolation_level="read_committed")[0] == visible[0]
        assert log.offset_by_time(0)[0] == 0
        # an ongoing transaction writes every key again: the scan back for k2 reaches
        # its last committed record, in the tier
        first7 = log.append(txn_batch(7, 3)).base_offset
        assert log.offset_by_key(b"k2") == first7 + 2
        assert last[b"k2"] == 13 < log.local_log_start_offset
        assert log.get_by_key(b"k2", isolation_level="read_committed").offset == 13
