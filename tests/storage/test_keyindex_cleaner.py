"""The key index after the cleaner: retention, compaction and delete by offsets never
leave ``get_by_key`` / ``offset_by_key`` naming a removed offset (in memory, and through
the persisted ``key-index`` file after a crash); out-of-range errors of consume, check
and stat name the log start offset from the ``log-start-offset`` checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.storage._cleaner import abandon

import seglog
from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage import (
    Log,
    Message,
    check,
    compact,
    delete_offsets,
    stat,
    trim_by_count,
    trim_by_offset,
)
from seglog.storage.index.key_index import KEY_INDEX_FILE


def _keyed(path: Path, n: int = 60, keys: int = 6, *, key_index: bool = True) -> Log:
    """``n`` messages, keys k0..k{keys-1} in turn, one publish each, small segments."""
    log = seglog.open_log(path, create=True, key_index=key_index, segment_bytes=512)
    for i in range(n):
        log.publish([Message(key=b"k%d" % (i % keys), value=b"v%d" % i, timestamp=1_000 + i)])
    return log


def test_compaction_keeps_last_record_and_forgets_removed_tombstones(tmp_path: Path) -> None:
    log = _keyed(tmp_path / "t-0")
    # a key whose only record is a tombstone, then enough records to close its segment
    log.publish([Message(key=b"gone", value=None, timestamp=1_000)])
    tomb = log.offset_by_key(b"gone")
    for i in range(60, 90):
        log.publish([Message(key=b"k%d" % (i % 6), value=b"v%d" % i, timestamp=1_000 + i)])
    assert tomb < log.segments()[-1].base_offset  # in a closed segment: cleanable
    last = {k: log.offset_by_key(b"k%d" % k) for k in range(6)}
    values = {k: log.get(off).value for k, off in last.items()}
    removed = compact(log, now_ms=10**12, delete_retention_ms=0)
    assert tomb in removed.offsets
    for k, off in last.items():
        assert log.offset_by_key(b"k%d" % k) == off
        assert log.get_by_key(b"k%d" % k).value == values[k]
    with pytest.raises(NotFoundError):
        log.offset_by_key(b"gone")
    with pytest.raises(NotFoundError):
        log.get_by_key(b"gone")
    log.close()
    with seglog.open_log(tmp_path / "t-0", key_index=True) as again:  # the saved file agrees
        with pytest.raises(NotFoundError):
            again.offset_by_key(b"gone")
        assert again.get_by_key(b"k0").offset == last[0]


def test_delete_offsets_falls_back_to_older_record_of_the_key(tmp_path: Path) -> None:
    log = _keyed(tmp_path / "t-0", 60)
    # k1 was published at 1, 7, 13, ...; its last record (55) sits in a closed segment
    # only after more appends
    for i in range(60, 100):
        log.publish([Message(key=b"x%d" % i, value=b"v%d" % i, timestamp=1_000 + i)])
    assert log.offset_by_key(b"k1") == 55
    assert delete_offsets(log, [55, 49]).offsets == [49, 55]
    assert log.offset_by_key(b"k1") == 43
    assert log.get_by_key(b"k1").value == b"v43"
    # every record of k2 deleted: not found
    res = delete_offsets(log, range(2, 60, 6))
    assert res.offsets == list(range(2, 60, 6))
    with pytest.raises(NotFoundError):
        log.get_by_key(b"k2")
    log.close()
    with seglog.open_log(tmp_path / "t-0", key_index=True) as again:
        assert again.get_by_key(b"k1").offset == 43
        with pytest.raises(NotFoundError):
            again.offset_by_key(b"k2")


def test_stale_key_index_file_is_not_trusted_after_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    _keyed(path, 90).close()  # a clean close writes the key-index file
    assert (path / KEY_INDEX_FILE).exists()
    log = seglog.open_log(path, key_index=True, segment_bytes=512)
    assert log.offset_by_key(b"k1") == 85
    for i in range(90, 110):  # k1's last record (85) goes into a closed segment
        log.publish([Message(key=b"x%d" % i, value=b"v%d" % i)])
    assert delete_offsets(log, [85]).offsets == [85]
    abandon(log)  # crash: the in-memory index is not saved
    with seglog.open_log(path, key_index=True) as log:
        assert log.offset_by_key(b"k1") == 79
        assert log.get_by_key(b"k1").value == b"v79"


def test_trimmed_keys_are_not_found_and_pruned(tmp_path: Path) -> None:
    log = _keyed(tmp_path / "t-0", 60)
    log.publish([Message(key=b"old", value=b"x")])  # offset 60
    for i in range(61, 100):
        log.publish([Message(key=b"k%d" % (i % 6), value=b"v%d" % i)])
    keys_before = log.stats().key_index_keys
    trim_by_offset(log, 70)
    for probe in (log.offset_by_key, log.get_by_key):
        with pytest.raises(NotFoundError):
            probe(b"old")
    assert log.stats().key_index_keys == keys_before - 1
    assert log.get_by_key(b"k3").offset == 99
    trim_by_count(log, 3)  # keeps 97, 98, 99: keys k1, k2, k3
    with pytest.raises(NotFoundError):
        log.get_by_key(b"k0")
    assert log.get_by_key(b"k2").offset == 98
    assert log.stats().key_index_keys == 3
    log.close()


def test_consume_below_log_start_names_the_log_start(tmp_path: Path) -> None:
    with _keyed(tmp_path / "t-0", 40, key_index=False) as log:
        trim_by_offset(log, 25)
        calls = (
            lambda: log.consume(3, 10),
            lambda: log.consume_columns(3, 10),
            lambda: log.read(3, 1000),
        )
        for call in calls:
            with pytest.raises(InvalidOffsetError, match="below the log start offset 25"):
                call()
        assert log.consume(seglog.OFFSET_OLDEST, 1)[1][0].offset == 25


def test_check_and_stat_report_the_checkpointed_log_start(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    with _keyed(path, 40, key_index=False) as log:
        trim_by_offset(log, 33)  # inside a segment: the checkpoint, not a base offset
        assert log.segments()[0].base_offset < 33
    [report] = check(path)
    assert report.ok
    assert (report.log_start_offset, report.log_end_offset) == (33, 40)
    [st] = stat(path)
    assert st["log_start_offset"] == 33
