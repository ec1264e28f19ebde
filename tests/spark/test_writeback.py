"""The staging writer's early writeback (``_writeback``) and its reused encode buffer."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from kafka.record.memory_records import MemoryRecords

from seglog.spark import _stage, _writeback
from seglog.spark._encode import Router
from seglog.spark._writeback import EarlyWriteback


def test_writeback_syncs_a_written_file_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = threading.Event()
    seen: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        real(fd)
        seen.append(fd)
        synced.set()

    monkeypatch.setattr(_writeback.os, "fdatasync", fdatasync)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        writeback = EarlyWriteback()
        os.write(fd, b"x" * 4096)
        writeback.written(fd)
        assert synced.wait(30)
        writeback.stop()
        assert seen == [fd]
        assert writeback.syncs == 1
        writeback.written(fd)  # after stop: ignored, no thread to sync it
        assert seen == [fd]
    finally:
        os.close(fd)


def test_writeback_error_is_raised_by_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux reports a writeback error once per open file: the background sync's error
    must reach the task (stop), not be lost."""
    failed = threading.Event()

    def fdatasync(fd: int) -> None:
        failed.set()
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(_writeback.os, "fdatasync", fdatasync)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        writeback = EarlyWriteback()
        writeback.written(fd)
        assert failed.wait(30)
        with pytest.raises(OSError, match="injected"):
            writeback.stop()
    finally:
        os.close(fd)


def test_stage_fails_when_the_early_writeback_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task whose background sync failed does not hand back a commit message."""
    failed = threading.Event()

    def fdatasync(fd: int) -> None:
        failed.set()
        raise OSError(errno.EIO, "injected")

    def rows() -> object:
        for i in range(3):
            yield pa.RecordBatch.from_pydict(
                {"key": [b"k%03d" % i] * 50, "value": [b"v" * 40] * 50}
            )
        assert failed.wait(30)  # the first chunks' sync ran (and failed) before the end

    monkeypatch.setattr(_writeback.os, "fdatasync", fdatasync)
    monkeypatch.setattr(_stage, "STAGE_GATHER_BYTES", 1000)
    with pytest.raises(OSError, match="injected"):
        _stage.stage(rows(), str(tmp_path), "t", Router(lambda t: 1), "none")  # type: ignore[arg-type]


def test_stage_reuses_its_buffer_across_chunks_of_any_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks growing and shrinking (the one buffer grows, its tail stays dirty): the
    staged file holds every record once, in order."""
    monkeypatch.setattr(_stage, "STAGE_GATHER_BYTES", 3000)
    sizes = [5, 60, 7, 300, 3, 120, 1]
    want: list[tuple[bytes, bytes]] = []
    batches = []
    for j, n in enumerate(sizes):
        keys = [b"k%02d-%04d" % (j, i) for i in range(n)]
        values = [b"%02d:%06d" % (j, i) + b"v" * 50 for i in range(n)]
        want += zip(keys, values, strict=True)
        batches.append(pa.RecordBatch.from_pydict({"key": keys, "value": values}))
    staged = _stage.stage(iter(batches), str(tmp_path), "t", Router(lambda t: 1), "none")
    (file,) = staged.files
    assert file.records == len(want)
    records = MemoryRecords((tmp_path / file.name).read_bytes())
    got = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        got += [(r.key, r.value) for r in batch]
    assert got == want
