"""Offset and time indexes off the Python heap (issue 7): entries the index files hold are
read back in blocks on lookup (``storage/index/offset_time.py``); only block summaries and
the active segment's unflushed tail stay in memory, and no file handle stays open for it.

The tests look at each segment's index objects (heap entries, lookups): internals, so
they reach them through the log's private ``_state``."""

from __future__ import annotations

import bisect
import os
import pathlib
from collections.abc import Callable, Iterator

import pytest

from seglog.storage import Log, open_log
from seglog.storage.index import offset_time
from seglog.storage.index.offset_time import BLOCK_CACHE, BLOCK_ENTRIES

from ._batches import make_batch
from ._fds import open_paths

N = 3000  # batches, one index entry each: several blocks per segment
CONFIG = {"index_interval_bytes": 1, "segment_bytes": 64 << 10}
T0 = 1_700_000_000_000


def _fill(log: Log) -> None:
    """``N`` one-record batches, offsets 0..N-1, timestamps T0 + 10 * offset."""
    chunk = 100
    for start in range(0, N, chunk):
        log.append(
            b"".join(make_batch(1, timestamp=T0 + 10 * i) for i in range(start, start + chunk))
        )
    log.sync()  # visible (the high watermark waits for the fsync)


@pytest.fixture
def tiny_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A block cache of 2 blocks, empty: lookups read the files."""
    monkeypatch.setattr(BLOCK_CACHE, "max_blocks", 2)
    BLOCK_CACHE.clear()
    yield
    BLOCK_CACHE.clear()


def _check_lookups(log: Log) -> None:
    for off in range(0, N, 7):
        assert log.get(off).offset == off
        assert log.consume(off, 2)[1][0].offset == off
        assert log.offset_by_time(T0 + 10 * off - 5) == (off, T0 + 10 * off)
        assert log.offset_by_time(T0 + 10 * off) == (off, T0 + 10 * off)
    for seg in log._state.segments:
        offsets, positions = seg.index.entries()
        timestamps, rels = seg.time_index.entries()
        assert len(offsets) == len(seg.index)
        assert len(timestamps) == len(seg.time_index)
        for rel in range(0, seg.next_offset - seg.base_offset + 2, 3):
            i = bisect.bisect_right(offsets, rel) - 1
            want = (offsets[i], positions[i]) if i >= 0 else (0, 0)
            assert seg.index.lookup(rel) == want
            ts = T0 + 10 * (seg.base_offset + rel)
            j = bisect.bisect_left(timestamps, ts) - 1
            assert seg.time_index.lookup_before(ts) == (rels[j] if j >= 0 else 0)


def test_closed_segments_keep_no_entries_in_memory(
    make_log: Callable[..., Log], tiny_cache: None
) -> None:
    log = make_log(**CONFIG)
    _fill(log)
    segs = log._state.segments
    assert len(segs) >= 3
    assert sum(len(s.index) for s in segs) > 4 * BLOCK_ENTRIES
    for seg in segs[:-1]:
        assert seg.index.heap_entries() == 0
        assert seg.time_index.heap_entries() == 0
    # the active one: at most a block plus what waits for the next 4 KiB write
    active = segs[-1]
    assert active.index.heap_entries() < BLOCK_ENTRIES + 4096 // 8
    assert active.time_index.heap_entries() < BLOCK_ENTRIES + 4096 // 12
    misses = BLOCK_CACHE.misses
    _check_lookups(log)
    assert BLOCK_CACHE.misses > misses  # the entries came from the files
    assert len(BLOCK_CACHE) <= 2


def _open_fds(root: pathlib.Path) -> list[str]:
    """Descriptors open on files under ``root`` (the whole process's count moved with
    other threads of the test session, e.g. py4j's sockets: 193 -> 192 in one run)."""
    prefix = f"{root}{os.sep}"
    return [path for path in open_paths() if path.startswith(prefix)]


def test_reopened_log_reads_indexes_from_files(tmp_path: pathlib.Path, tiny_cache: None) -> None:
    with open_log(tmp_path / "log", create=True, **CONFIG) as log:
        _fill(log)
    for read_only in (False, True):
        with open_log(tmp_path / "log", read_only=read_only, **CONFIG) as log:
            segs = log._state.segments
            assert all(s.index.heap_entries() == 0 for s in segs)
            assert all(s.time_index.heap_entries() == 0 for s in segs)
            fds = _open_fds(tmp_path)
            _check_lookups(log)
            assert _open_fds(tmp_path) == fds  # no handle kept per index


def test_read_only_reader_drops_rolled_segments_entries(
    tmp_path: pathlib.Path, tiny_cache: None
) -> None:
    with open_log(tmp_path / "log", create=True, **CONFIG) as writer:
        writer.append(make_batch(1, timestamp=T0))
        with open_log(tmp_path / "log", read_only=True, **CONFIG) as reader:
            _fill(writer)
            writer.sync()  # the rolled segments' index files are written
            reader.refresh()
            segs = reader._state.segments
            assert len(segs) >= 3
            # the first segment was the reader's tail (entries from its data), now sealed
            assert segs[0].index.heap_entries() == 0
            assert segs[0].time_index.heap_entries() == 0
            for off in range(1, N, 11):
                assert reader.get(off).offset == off


def test_unreadable_block_falls_back_to_a_scan(
    tmp_path: pathlib.Path, tiny_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index file another process rewrote or removed under a lookup: the segment is
    searched from its start instead (slower, still right)."""
    with open_log(tmp_path / "log", create=True, **CONFIG) as log:
        _fill(log)
        seg = log._state.segments[0]
        assert seg.index.lookup(200) != (0, 0)

        def short_read(self: object, first: int, count: int) -> bytes:
            return b""

        monkeypatch.setattr(offset_time._IndexFile, "_read", short_read)
        BLOCK_CACHE.clear()
        assert seg.index.lookup(200) == (0, 0)
        assert seg.time_index.lookup_before(T0 + 2000) == 0
        for off in range(0, seg.next_offset, 13):
            assert log.get(off).offset == off
            assert log.offset_by_time(T0 + 10 * off) == (off, T0 + 10 * off)
