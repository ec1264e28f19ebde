"""Indexes: persisted key index (get/offset/consume by key), time index (get/offset by
time), and their distinct errors. Tests taking ``make_log`` run on disk and in memory;
the key index file's persistence (reopen, stale or garbage file) is disk-only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from seglog import OFFSET_NEWEST, OFFSET_OLDEST, Log, Message, open_log
from seglog.errors import InvalidOffsetError, NoIndexError, NotFoundError
from seglog.storage import rebuild_key_index
from seglog.storage.index.key_index import KEY_INDEX_FILE, KeyIndex

from ._batches import make_batch

MakeLog = Callable[..., Log]


def _fill(log: Log, rounds: int = 5) -> None:
    for r in range(rounds):
        log.publish([Message(key=b"k%d" % (i % 7), value=b"%d-%d" % (r, i)) for i in range(20)])


def test_key_index_persisted_and_reused(tmp_path: Path) -> None:
    p = tmp_path / "p"
    with open_log(p, create=True, key_index=True, segment_bytes=1500) as log:
        _fill(log)
        expect = {b"k%d" % k: log.offset_by_key(b"k%d" % k) for k in range(7)}
        assert log.get_by_key(b"k3").value == b"4-17"
    raw = (p / KEY_INDEX_FILE).read_bytes()
    loaded = KeyIndex.from_bytes(raw)
    assert loaded is not None
    idx, end, _, _ = loaded
    assert end == 100
    assert {k: idx.get(k) for k in expect} == expect
    # reopened: same answers; new appends on top of the loaded file are indexed too
    with open_log(p, key_index=True) as log:
        assert {k: log.offset_by_key(k) for k in expect} == expect
        log.publish([Message(key=b"k3", value=b"new")])
        assert log.offset_by_key(b"k3") == 100
    with open_log(p, read_only=True, key_index=True) as ro:
        assert ro.get_by_key(b"k3").value == b"new"


def test_key_index_file_stale_or_garbage_is_rebuilt(tmp_path: Path) -> None:
    p = tmp_path / "p"
    with open_log(p, create=True, key_index=True) as log:
        _fill(log, 2)
    good = (p / KEY_INDEX_FILE).read_bytes()
    # garbage, truncated, and a valid file describing other data: all rebuilt from the log
    fake = KeyIndex()
    fake.add(make_batch(3))  # keys k0..k2 at offsets 0..2
    for bad in (b"garbage", good[:-5], fake.to_bytes(40, 0, 12345)):
        (p / KEY_INDEX_FILE).write_bytes(bad)
        with open_log(p, key_index=True) as log:
            assert log.offset_by_key(b"k1") == 35
            assert log.offset_by_key(b"k6") == 33
            assert log.get_by_key(b"k0").value == b"1-14"
    # a file covering more than the log holds (log cut below it) is stale too
    with open_log(p, key_index=True) as log:
        log.publish([Message(key=b"k1", value=b"x")])
    stale = (p / KEY_INDEX_FILE).read_bytes()
    (p / KEY_INDEX_FILE).write_bytes(good)
    with open_log(p, key_index=True) as log:  # older file: loaded, then tail decoded
        assert log.offset_by_key(b"k1") == 40
    assert KeyIndex.from_bytes(stale) is not None


def test_consume_by_key(make_log: MakeLog) -> None:
    with make_log(key_index=True) as log:
        _fill(log, 3)  # k0 at 0,7,14,20,27,...
        nxt, got = log.consume_by_key(b"k0", OFFSET_OLDEST, 4)
        assert [m.offset for m in got] == [0, 7, 14, 20]
        assert nxt == 21
        nxt, got = log.consume_by_key(b"k0", nxt, 100)
        assert [m.offset for m in got] == [27, 34, 40, 47, 54]
        assert nxt == 60
        assert log.consume_by_key(b"k0", 55, 10) == (60, [])
        assert log.consume_by_key(b"nope", 0, 10) == (60, [])
        assert log.consume_by_key(b"k0", OFFSET_NEWEST, 10) == (60, [])
        with pytest.raises(InvalidOffsetError):
            log.consume_by_key(b"k0", 61, 10)
    with make_log() as log, pytest.raises(NoIndexError):
        log.consume_by_key(b"k0", 0, 10)


def _without_key_index(make_log: MakeLog, backend: str, path: Path) -> Log:
    """The log at ``path`` reopened without a key index (disk), or a new one holding the
    same keys (memory: nothing to reopen)."""
    if backend == "disk":
        return open_log(path)
    log = make_log()
    _fill(log, 1)
    return log


def test_distinct_errors(make_log: MakeLog, backend: str) -> None:
    with make_log(key_index=True) as log:
        path = log.directory
        log.publish([Message(key=b"a", value=b"1", timestamp=1000)])
        log.publish([Message(key=b"b", value=b"2", timestamp=2000)])
        with pytest.raises(NotFoundError):
            log.get_by_key(b"zz")
        with pytest.raises(NotFoundError):
            log.offset_by_key(b"zz")
        with pytest.raises(InvalidOffsetError):
            log.get(2)
        with pytest.raises(NotFoundError):
            log.get_by_time(3000)
        with pytest.raises(NotFoundError):
            log.offset_by_time(3000)
        assert not issubclass(NotFoundError, InvalidOffsetError)
        assert not issubclass(NoIndexError, NotFoundError)
    with _without_key_index(make_log, backend, path) as log:
        for call in (log.get_by_key, log.offset_by_key):
            with pytest.raises(NoIndexError):
                call(b"a")


def test_get_and_offset_by_time(make_log: MakeLog) -> None:
    with make_log(segment_bytes=600, index_interval_bytes=100) as log:
        for i in range(40):  # timestamps 1000, 1010, ... one per message, many segments
            log.publish([Message(value=b"v%d" % i, timestamp=1000 + 10 * i)])
        assert log.stat()["segments"] > 3
        assert log.offset_by_time(0) == (0, 1000)
        assert log.offset_by_time(1000) == (0, 1000)
        assert log.offset_by_time(1001) == (1, 1010)
        assert log.offset_by_time(1205) == (21, 1210)
        assert log.get_by_time(1390).value == b"v39"
        m = log.get_by_time(1255)
        assert (m.offset, m.timestamp, m.value) == (26, 1260, b"v26")
        with pytest.raises(NotFoundError):
            log.get_by_time(1391)


def test_rebuild_key_index(make_log: MakeLog, backend: str) -> None:
    with make_log(key_index=True) as log:
        path = log.directory
        _fill(log, 1)
        # internals: as if a cleaner rewrote the data under the index
        log._state.keys = KeyIndex()
        with pytest.raises(NotFoundError):
            log.offset_by_key(b"k2")
        idx = rebuild_key_index(log)
        assert len(idx) == 7
        assert log.offset_by_key(b"k2") == 16
    with _without_key_index(make_log, backend, path) as log, pytest.raises(NoIndexError):
        rebuild_key_index(log)
