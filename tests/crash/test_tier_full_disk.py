"""A full local disk with a healthy tier keeps serving reads (tiered storage, KIP-405):
the partition directory and the remote cache share a 4 MiB tmpfs filled to the last
byte; the history that lives only in the object store is still read (the cache falls
back to a RAM directory), and every record read is the one written."""

from __future__ import annotations

import errno
import os
import pathlib
import shutil

import pytest

from seglog.storage import OFFSET_OLDEST, Log, LogConfig, Message, RemoteStorage, tier_sync

from ._mounts import tmpfs_mount

RAM_CACHE = pathlib.Path("/dev/shm/seglog-remote-cache")
N = 120


def _fill_disk(mnt: pathlib.Path) -> None:
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError, match="No space left") as info:
            _write_forever(fd)
        assert info.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _write_forever(fd: int) -> None:
    while True:
        os.write(fd, bytes(4096))


def test_full_disk_keeps_serving_remote_reads(tmp_path: pathlib.Path) -> None:
    config = LogConfig(segment_messages=20, remote_storage_enable=True, local_retention_bytes=0)
    with tmpfs_mount(tmp_path / "disk", "4m") as mnt:
        remote = RemoteStorage(f"file://{tmp_path / 'tier'}", cache_dir=str(mnt / "cache"))
        try:
            with Log.open(mnt / "p-0", config, create=True, remote=remote) as log:
                for i in range(N):
                    log.publish([Message(value=b"v%04d" % i + bytes(8000), timestamp=1000 + i)])
                assert tier_sync(log).error is None
                assert log.local_log_start_offset == 100
                _fill_disk(mnt)
                with pytest.raises(OSError, match="No space left"):  # full indeed
                    (mnt / "probe").write_bytes(bytes(8192))
                # remote history: downloaded although the cache's disk is full
                assert log.get(0).value[:5] == b"v0000"
                _, msgs = log.consume(OFFSET_OLDEST, 1000)
                assert [m.value[:5] for m in msgs] == [b"v%04d" % i for i in range(N)]
                assert log.offset_by_time(1000 + 55)[0] == 55
                tier = log.remote_tier
                assert tier is not None
                assert tier.cache.stats.misses >= 5
        finally:
            shutil.rmtree(RAM_CACHE, ignore_errors=True)
