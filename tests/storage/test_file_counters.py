"""``Log.counters``: the file operations of one open log (the broker exports them as
``seglog_storage_*_total``), checked step by step: publish and roll, trim (deletions and
renames), compaction (swap renames and index rewrites), delete by offsets, adopt (the
rename and its index files). Disk only: the counts are of files in the log directory."""

from __future__ import annotations

import os
import pathlib
import time

from tests.storage._batches import make_batch

import seglog
from seglog.storage import Message, compact, delete_offsets, trim_by_offset


def _snapshot(log: seglog.Log) -> dict[str, int]:
    return log.counters.as_dict()


def _delta(log: seglog.Log, before: dict[str, int]) -> dict[str, int]:
    """Counters that moved since ``before``: {name: increase}."""
    now = _snapshot(log)
    return {k: now[k] - before[k] for k in now if now[k] != before[k]}


def _files(directory: pathlib.Path, base: int) -> list[pathlib.Path]:
    """The segment's files that exist (``.log``, ``.index``, ``.timeindex``)."""
    stem = f"{base:020d}"
    return [
        p
        for p in (directory / f"{stem}{ext}" for ext in (".log", ".index", ".timeindex"))
        if p.exists()
    ]


def _publish(log: seglog.Log, n: int, keys: int = 3) -> None:
    for i in range(n):
        log.publish([Message(key=b"k%d" % (i % keys), value=b"v%d" % i, timestamp=1_000 + i)])


def test_publish_and_roll_count_no_deletions_or_renames(tmp_path: pathlib.Path) -> None:
    with seglog.open_log(tmp_path / "t-0", create=True, segment_bytes=300) as log:
        before = _snapshot(log)
        _publish(log, 20)
        moved = _delta(log, before)
        rolls = len(log.segments()) - 1
        assert rolls > 2
        assert moved["appends"] == 20
        assert moved["appended_records"] == 20
        assert moved["rolls"] == rolls
        assert moved["opens"] == rolls
        assert "deletions" not in moved
        assert "renames" not in moved
        before = _snapshot(log)
        _, msgs = log.consume(0, 100)
        assert len(msgs) == 20
        moved = _delta(log, before)
        assert moved["reads"] >= 1
        assert moved["read_bytes"] == sum(s.size for s in log.segments())


def test_trim_counts_a_rename_and_a_deletion_per_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t-0"
    with seglog.open_log(path, create=True, segment_bytes=300) as log:
        _publish(log, 20)
        segs = log.segments()
        gone = segs[:2]
        n_files = sum(len(_files(path, s.base_offset)) for s in gone)
        assert n_files >= 2 * 1  # at least the .log files
        before = _snapshot(log)
        res = trim_by_offset(log, segs[2].base_offset)
        assert list(res.segments) == [s.base_offset for s in gone]
        assert _delta(log, before) == {"deletions": n_files, "renames": n_files}


def test_compaction_counts_swap_renames_and_index_rewrites(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t-0"
    with seglog.open_log(path, create=True, segment_bytes=300) as log:
        _publish(log, 30)
        closed = log.segments()[:-1]
        before = _snapshot(log)
        res = compact(log)
        assert res.offsets  # superseded keys removed
        # a rewritten segment lost records: smaller
        rewritten = [s for s, new in zip(closed, log.segments(), strict=False) if new.size < s.size]
        assert len(rewritten) >= 3
        k = len(rewritten)
        # each rewrite: .log.cleaned -> .swap -> .log, both .cleaned indexes -> live (four
        # renames); both indexes written once (the .cleaned files)
        assert _delta(log, before) == {"renames": 4 * k, "index_writes": 2 * k}


def test_delete_offsets_counts_like_compaction(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t-0"
    with seglog.open_log(path, create=True, segment_bytes=300) as log:
        _publish(log, 20)
        first, second = log.segments()[:2]
        before = _snapshot(log)
        res = delete_offsets(log, [first.base_offset, second.base_offset])
        assert res.offsets == [first.base_offset, second.base_offset]
        assert _delta(log, before) == {"renames": 8, "index_writes": 4}


def test_adopt_counts_its_rename_and_index_writes(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "t-0"
    staged = tmp_path / "staged"
    with seglog.open_log(path, create=True, index_interval_bytes=64) as log:
        log.append(make_batch(2))
        log.sync()
        assert all(os.stat(p).st_size == 0 for p in _files(path, 0)[1:])  # nothing yet
        staged.write_bytes(b"".join(make_batch(4, tag=b"s%d" % i) for i in range(5)))
        before = _snapshot(log)
        info = log.adopt(staged)
        log.sync()  # the round closing the rolled segment writes its final time entry
        indexes = _files(path, 0)[1:] + _files(path, info.base_offset)[1:]
        written = [p for p in indexes if os.stat(p).st_size > 0]
        assert len(written) == 3  # the adopted segment's two, segment 0's time index
        moved = _delta(log, before)
        assert moved.pop("renames") == 1
        assert moved.pop("index_writes") == len(written)  # each written once
        assert "deletions" not in moved


def test_adopt_over_an_empty_active_segment_counts_its_index_files(
    tmp_path: pathlib.Path,
) -> None:
    """The empty active segment is replaced: its two (empty) index files are removed
    and rewritten for the adopted segment; its ``.log`` goes with the rename."""
    path = tmp_path / "t-0"
    staged = tmp_path / "staged"
    with seglog.open_log(path, create=True, index_interval_bytes=64) as log:
        staged.write_bytes(b"".join(make_batch(4, tag=b"s%d" % i) for i in range(2)))
        assert len(_files(path, 0)) == 3
        before = _snapshot(log)
        log.adopt(staged)
        written = [p for p in _files(path, 0)[1:] if os.stat(p).st_size > 0]
        assert len(written) == 2
        moved = _delta(log, before)
        assert moved.pop("renames") == 1
        assert moved.pop("deletions") == 2
        assert moved.pop("index_writes") == len(written)


def test_syncs_count_each_fsync_round_of_a_blocking_publish(tmp_path: pathlib.Path) -> None:
    """Default policy: each ``publish`` of a lone writer fsyncs once before returning, and
    ``counters.syncs`` (the broker's ``seglog_storage_syncs_total``) counts each round."""
    with seglog.open_log(tmp_path / "t-0", create=True) as log:
        before = _snapshot(log)
        _publish(log, 20)
        assert _delta(log, before)["syncs"] == 20
        assert log.counters.as_dict()["syncs"] == log.fsync_count
        assert log.stats().counters["syncs"] == log.fsync_count
        log.sync()  # nothing new to make durable: no round
        assert log.counters.syncs == log.fsync_count == before["syncs"] + 20


def test_syncs_count_the_background_rounds_of_flush_messages(tmp_path: pathlib.Path) -> None:
    """``flush_messages``: the fsync thread syncs on its own; every round it runs (each one
    the sync observer sees) is counted once in ``counters.syncs``."""
    rounds: list[int] = []
    with seglog.open_log(tmp_path / "t-0", create=True, flush_messages=5) as log:
        log.set_sync_observer(lambda _s, n: rounds.append(n))
        _publish(log, 20)
        assert log.sync_future(20).result(timeout=30) >= 20
        deadline = time.monotonic() + 10  # the observer runs just after the round's count
        while len(rounds) < log.counters.syncs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert log.counters.syncs >= 1
        assert log.counters.syncs == len(rounds) == log.fsync_count
        assert sum(rounds) == 20  # the rounds together made all 20 records durable
