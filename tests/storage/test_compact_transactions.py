"""Compaction of a log with transactions (Kafka's cleaner rules): aborted records removed
and never superseding a key, nothing cleaned at or past the last stable offset, markers
kept until their transaction's batches are gone and delete.retention.ms passed, the
.txnindex rewritten with the ABORT markers kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.storage._cleaner import Crash, abandon, crash_at

from seglog.storage import (
    OFFSET_OLDEST,
    Log,
    Message,
    check,
    compact,
    encode_control_batch,
    is_control_batch,
    open_log,
)
from seglog.storage.record.batch import parse_header
from seglog.storage.segment.swap import stepping

from ._batches import txn_batch

NOW = 10**13


def _end(log: Log, pid: int, *, commit: bool) -> int:
    marker = encode_control_batch(
        pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=NOW - 1000
    )
    return log.append(marker, origin="coordinator").base_offset


def _markers(log: Log) -> list[int]:
    return [
        parse_header(b).base_offset
        for b in log.batches(OFFSET_OLDEST)
        if is_control_batch(parse_header(b).attributes)
    ]


def _records(
    log: Log, level: str = "read_committed"
) -> dict[int, tuple[bytes | None, bytes | None]]:
    _, msgs = log.consume(OFFSET_OLDEST, 10_000, isolation_level=level)  # type: ignore[arg-type]
    return {m.offset: (m.key, m.value) for m in msgs}


def _plain(log: Log, key: bytes, value: bytes) -> int:
    return log.publish([Message(key=key, value=value, timestamp=1)]) - 1


def test_cleaner_rules(tmp_path: Path) -> None:
    with open_log(tmp_path / "p", create=True, segment_messages=3) as log:
        assert _plain(log, b"a0", b"committed") == 0
        log.append(txn_batch(1, 1, key_prefix=b"a"))  # 1: a0, aborted below
        assert _end(log, 1, commit=False) == 2
        log.append(txn_batch(2, 1, key_prefix=b"b"))  # 3: b0, committed
        assert _end(log, 2, commit=True) == 4
        for i in range(8):  # 5-12
            _plain(log, b"f%d" % i, b"x")
        log.append(txn_batch(3, 1, key_prefix=b"a"))  # 13: a0, ongoing
        for i in range(4):  # 14-17
            _plain(log, b"g%d" % i, b"x")
        log.sync()
        assert log.last_stable_offset == 13
        committed = _records(log)
        assert committed[0] == (b"a0", b"committed")
        assert 13 not in committed

        # delete.retention.ms not passed: the aborted record goes, markers stay
        res = compact(log, now_ms=NOW)
        assert 1 in res.offsets
        assert 13 not in res.offsets  # past the LSO: never cleaned
        assert 0 not in res.offsets  # the aborted a0 does not supersede it
        assert _records(log) == committed
        assert 1 not in _records(log, "read_uncommitted")
        assert _markers(log) == [2, 4]
        assert log.aborted_transactions(0, 100) == [(1, 1)]
        assert log.ongoing_transactions() == {3: 13}

        # past the horizon: the ABORT marker (its batches are gone) goes with its
        # .txnindex entry; the COMMIT marker stays while b0 does
        compact(log, now_ms=NOW, delete_retention_ms=0)
        assert _markers(log) == [4]
        assert log.aborted_transactions(0, 100) == []
        assert _records(log) == committed

        # producer 3 aborts; a later b0 supersedes producer 2's record: once it is gone,
        # the COMMIT marker goes at the next pass
        marker3 = _end(log, 3, commit=False)
        _plain(log, b"b0", b"newer")
        for i in range(6):
            _plain(log, b"h%d" % i, b"x")
        log.sync()
        res = compact(log, now_ms=NOW, delete_retention_ms=0)
        assert {3, 13} <= set(res.offsets)
        assert 0 not in res.offsets
        compact(log, now_ms=NOW, delete_retention_ms=0)
        assert 4 not in _markers(log)
        assert marker3 not in _markers(log)
        final = _records(log)
        assert final[0] == (b"a0", b"committed")
        assert all(k != b"b0" or v == b"newer" for k, v in final.values())
        assert _records(log, "read_uncommitted") == final
    (report,) = check(tmp_path / "p")
    assert report.ok
    assert report.index_problems == []
    with open_log(tmp_path / "p") as log:
        assert _records(log) == final
        assert log.ongoing_transactions() == {}


def test_txnindex_rewritten_with_the_markers_kept(tmp_path: Path) -> None:
    d = tmp_path / "p"
    with open_log(d, create=True, segment_messages=20) as log:
        for pid in (1, 2):
            log.append(txn_batch(pid, 2, key_prefix=b"t%d-" % pid))
            _end(log, pid, commit=False)
        _plain(log, b"a", b"1")
        _plain(log, b"a", b"2")  # superseded: the segment is rewritten
        for i in range(20):
            _plain(log, b"f%d" % i, b"x")
        log.sync()
        before = (d / f"{0:020d}.txnindex").read_bytes()
        assert len(before) == 2 * 34
        compact(log, now_ms=NOW)  # markers kept (horizon not passed)
        assert (d / f"{0:020d}.txnindex").read_bytes() == before
        assert log.aborted_transactions(0, 100) == [(1, 0), (2, 3)]
        compact(log, now_ms=NOW, delete_retention_ms=0)
        assert not (d / f"{0:020d}.txnindex").exists()
        assert log.aborted_transactions(0, 100) == []


@pytest.mark.parametrize("step", ["cleaned", "swap", "log-live", "indexes-live"])
def test_crash_at_each_step_of_a_transactional_compaction(tmp_path: Path, step: str) -> None:
    """A crash inside the swap of a segment losing aborted records and an ABORT marker:
    the reopened log holds the old or the new segment, its .txnindex agrees with it (check
    finds no index problem) and read_committed sees the same records."""
    d = tmp_path / "p"
    log = open_log(d, create=True, segment_messages=4)
    for i in range(3):
        log.append(txn_batch(10 + i, 2, key_prefix=b"t%d-" % i))
        _end(log, 10 + i, commit=i != 1)
    for i in range(6):
        _plain(log, b"f%d" % i, b"x")
    log.sync()
    committed = _records(log)
    ongoing = log.ongoing_transactions()
    with pytest.raises(Crash), stepping(crash_at(step)):
        compact(log, now_ms=NOW, delete_retention_ms=0)
    abandon(log)
    with open_log(d) as log:
        assert _records(log) == committed
        assert log.ongoing_transactions() == ongoing
        assert [p.name for p in d.iterdir() if p.name.endswith((".cleaned", ".swap"))] == []
    (report,) = check(d)
    assert report.ok
    assert report.index_problems == []
