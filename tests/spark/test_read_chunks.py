"""``read_range`` reads whole batches ~CHUNK_BYTES at a time (one pread each, decoded in
place) and decodes the next chunk in a helper thread: every offset of the range exactly
once, whatever the chunk size, across segments, and an early stop leaves nothing running."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import seglog.spark._reader as reader
from seglog.spark._reader import OffsetRangePartition, read_range
from seglog.storage import DataDir, Message


def _publish(path: Path) -> None:
    """300 records in batches of 1 to 7 records, segments of ~1 KiB."""
    with DataDir(path) as data_dir:
        data_dir.create_topic("c", 1, {"segment.bytes": "1024"})
        log = data_dir.log("c", 0)
        i = 0
        while i < 300:
            n = min(1 + i % 7, 300 - i)
            log.publish([Message(key=b"k%d" % j, value=b"v%05d" % j) for j in range(i, i + n)])
            i += n


@pytest.mark.parametrize("chunk", [1, 200, 1000, 1 << 20])
def test_chunks_read_every_offset_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    path = tmp_path / "data"
    _publish(path)
    # 1 byte: below one batch, each chunk is then exactly one batch (the first is read whole)
    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    for start, end in [(0, 300), (3, 297), (150, 151), (299, 300), (10, 10)]:
        part = OffsetRangePartition(str(path), "c", 0, start, end, False)
        batches = list(read_range(part))
        offsets = [o for b in batches for o in b.column("offset").to_pylist()]
        assert offsets == list(range(start, end))
        values = [v for b in batches for v in b.column("value").to_pylist()]
        assert values == [b"v%05d" % j for j in range(start, end)]
        if chunk == 1 and end - start > 7:
            assert len(batches) > 1  # the range really came in several chunks


def test_early_stop_leaves_no_reader_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data"
    _publish(path)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 200)
    rows = read_range(OffsetRangePartition(str(path), "c", 0, 0, 300, False))
    first = next(rows)
    assert first.column("offset").to_pylist()[0] == 0
    rows.close()  # e.g. limit(): the chunk being decoded ahead is waited for, then dropped
    assert not [t for t in threading.enumerate() if t.name.startswith("seglog-read")]


def test_reader_tunes_malloc_in_its_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task reading a range fixes glibc's malloc thresholds in its Python worker first
    (``seglog._malloc.tune_malloc``, as the broker does: fewer page faults per chunk)."""
    path = tmp_path / "data"
    _publish(path)
    calls: list[tuple[int, ...]] = []
    monkeypatch.setattr(reader, "tune_malloc", lambda *sizes: calls.append(sizes) is None)
    batches = list(read_range(OffsetRangePartition(str(path), "c", 0, 0, 300, False)))
    assert sum(b.num_rows for b in batches) == 300
    assert calls == [(reader.WORKER_MMAP_THRESHOLD, reader.WORKER_TRIM_THRESHOLD)]
