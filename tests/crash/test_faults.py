"""Disk full (a 2 MiB tmpfs) and fsync errors (EIO injected by the lazy FUSE filesystem)."""

from __future__ import annotations

import os
import shutil

import pytest
from tests._wait import wait_until
from tests.storage._threads import with_sync_thread

from seglog.errors import LogClosedError, StorageError
from seglog.storage import Log, LogConfig, Message, check

from ._harness import log_file_bytes
from ._mounts import lazy_mount, tmpfs_mount
from .conftest import record_figure

CFG = LogConfig(segment_bytes=256 << 10, index_interval_bytes=4096)


def _msgs(start: int, n: int, size: int) -> list[Message]:
    return [
        Message(key=b"k%d" % (start + i), value=b"%08d" % (start + i) * (size // 8))
        for i in range(n)
    ]


def _verify(log: Log, end: int, size: int) -> None:
    offset = 0
    while offset < end:
        offset_next, msgs = log.consume(offset, 500)
        for m in msgs:
            assert m.offset == offset
            assert m.value == b"%08d" % offset * (size // 8)
            offset += 1
        assert offset == offset_next
    assert offset == end


def _fill_until_full(mnt, cfg: LogConfig, filler_bytes: int, size: int, n: int):
    """Publish until ENOSPC; assert the failure is clean, free space, resume; return
    (acknowledged before the error, error text, end after resuming)."""
    filler = mnt / "filler"
    filler.write_bytes(b"\0" * filler_bytes)
    log = Log.open(mnt / "p", cfg, create=True)
    try:
        acked = 0
        error: StorageError | None = None
        for _ in range(5000):
            try:
                acked = log.publish(_msgs(acked, n, size))
            except StorageError as e:
                error = e
                break
        assert error is not None, "the tmpfs never filled up"
        assert "No space left on device" in str(error), error
        assert log.next_offset() == acked  # no offset given to the failed batch
        # no acknowledgement after the error while the disk stays full
        with pytest.raises(StorageError):
            log.publish(_msgs(acked, n, size))
        assert log.next_offset() == acked
        # no partial batch: the files hold exactly the acknowledged batches
        assert log_file_bytes(mnt / "p") == log.stat()["bytes"]
        report = check(mnt / "p")[0]
        assert report.ok, report
        assert report.log_end_offset == acked, report
        filler.unlink()  # free space: appends resume at the next offset
        resumed = log.publish(_msgs(acked, n, size))
        assert resumed == acked + n
        resumed = log.publish(_msgs(resumed, n, size))  # and keep going (rolls too)
        log.sync()
    finally:
        log.close()
    with Log.open(mnt / "p", cfg) as again:
        assert again.log_end_offset == resumed
        _verify(again, resumed, size)
    assert check(mnt / "p")[0].ok
    return acked, str(error), resumed


def test_disk_full_fails_cleanly_and_resumes_after_space_is_freed(tmp_path):
    """A 2 MiB tmpfs filled to different levels, so ENOSPC strikes at different moments
    (inside a batch write, at a roll, at an index flush, at the recovery point)."""
    size, runs, errors = 1024, 0, set()
    small = LogConfig(segment_bytes=24 << 10, index_interval_bytes=1024)
    first = None
    with tmpfs_mount(tmp_path / "full", "2m") as mnt:
        for k in range(8):
            shutil.rmtree(mnt / "p", ignore_errors=True)
            cfg = CFG if k == 0 else small
            acked, error, resumed = _fill_until_full(
                mnt, cfg, (600 << 10) + k * 4096 + 300, size, 20 if k == 0 else 3
            )
            first = first or (acked, error, resumed)
            kind = "cannot roll" if "cannot roll" in error else error.split(" /")[0]
            errors.add(f"{kind} ...: No space left on device")
            runs += 1
    acked, error, resumed = first
    record_figure(
        f"disk full (2 MiB tmpfs, {runs} fill levels): each time the append failed with "
        f"ENOSPC ({'; '.join(sorted(errors))}), 0 acknowledged after it, no partial batch, "
        f"appends resumed after freeing space; first run: {acked} messages acknowledged "
        f"before ENOSPC, {resumed - acked} more after"
    )


def test_fsync_eio_takes_the_log_offline_never_retried(tmp_path):
    size = 200
    with lazy_mount(tmp_path / "mnt") as fs:
        p = fs.path / "p"
        log, fsync_thread = with_sync_thread(lambda: Log.open(p, CFG, create=True))
        try:
            acked = 0
            for _ in range(5):
                acked = log.publish(_msgs(acked, 10, size))
            fs.control("reset_counters")
            fs.control("fsync_eio 1")
            with pytest.raises(LogClosedError, match="fsync"):
                log.publish(_msgs(acked, 10, size))
            with pytest.raises(LogClosedError):  # offline: no acknowledgement any more
                log.publish(_msgs(acked, 10, size))
            with pytest.raises(LogClosedError):
                log.sync()
            with pytest.raises(LogClosedError):
                log.append(b"")
            # the fsync thread stops for good at the error (a retrying one would stay
            # alive, and its retries show up in the counters)
            wait_until(lambda: not fsync_thread.is_alive(), timeout=10, message="fsync thread")
        finally:
            log.close()
        counters = fs.counters()
        assert counters["fsync_eio"] == 1
        assert counters["fsync_after_eio"] == 0, counters  # never retried, not even at close
        assert not (p / ".clean_shutdown").exists()
        fs.power_loss()  # what the failed fsync did not make durable is gone
        with Log.open(p, CFG) as again:  # recovery: exactly the acknowledged messages
            assert again.log_end_offset == acked
            _verify(again, acked, size)
            after = again.publish(_msgs(acked, 10, size))
        assert check(p)[0].ok
        assert os.path.ismount(fs.path)
    record_figure(
        f"fsync EIO (FUSE): log offline at the first failed fsync, {counters['fsync_after_eio']} "
        f"fsyncs retried, {acked} acknowledged messages intact after power loss + reopen, "
        f"appends resume at {acked} (-> {after})"
    )
