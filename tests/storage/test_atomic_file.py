"""The one atomic-file writer: temporary file, fsync, rename, directory fsync; on any
failure before the rename the temporary file is removed and the target left as it was."""

from __future__ import annotations

import errno
import os
import pathlib
import stat

import pytest

from seglog.storage import atomic_file, atomic_write


def _names(directory: pathlib.Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_write_small_file_replaces(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "state.json"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert _names(tmp_path) == ["state.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644 & ~_umask()


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_streamed_writes_and_fsyncs(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "big.bin"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with atomic_file(target) as f:
        for i in range(100):
            f.write(bytes([i]) * 10_000)
        assert not target.exists()  # nothing under the final name before the rename
    assert target.read_bytes() == b"".join(bytes([i]) * 10_000 for i in range(100))
    assert len(synced) == 2  # the file, then the directory
    assert _names(tmp_path) == ["big.bin"]


def test_fixed_temporary_name_overwrites_a_leftover(tmp_path: pathlib.Path) -> None:
    target, tmp = tmp_path / "m.parquet", tmp_path / ".m.parquet.tmp"
    tmp.write_bytes(b"half a file from a crash" * 100)
    with atomic_file(target, tmp=tmp) as f:
        f.write(b"whole")
    assert target.read_bytes() == b"whole"
    assert _names(tmp_path) == ["m.parquet"]


class Boom(Exception):
    pass


@pytest.mark.parametrize("existing", [None, b"old content"])
def test_error_in_the_block_removes_the_temporary_file(
    tmp_path: pathlib.Path, existing: bytes | None
) -> None:
    target = tmp_path / "t"
    if existing is not None:
        target.write_bytes(existing)

    def write_then_fail() -> None:
        with atomic_file(target) as f:
            f.write(b"new, half written")
            raise Boom

    with pytest.raises(Boom):
        write_then_fail()
    assert _names(tmp_path) == ([] if existing is None else ["t"])
    if existing is not None:
        assert target.read_bytes() == existing


@pytest.mark.parametrize("failing", ["fsync", "replace"])
@pytest.mark.parametrize("streamed", [True, False])
def test_io_error_leaves_the_target_untouched(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, failing: str, streamed: bool
) -> None:
    target = tmp_path / "t"
    target.write_bytes(b"old content")

    def fail(*args: object) -> None:
        raise OSError(errno.EIO, "injected")

    def write() -> None:
        if streamed:
            with atomic_file(target) as f:
                f.write(b"new content")
        else:
            atomic_write(target, b"new content")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match="injected"):
        write()
    monkeypatch.undo()
    assert target.read_bytes() == b"old content"
    assert _names(tmp_path) == ["t"]
