"""A read-only Log beside a live writer: whole batches only, changes nothing, refreshes."""

from __future__ import annotations

import os

import pytest

from seglog.errors import DirectoryNotFoundError, InvalidOffsetError, ReadOnlyError
from seglog.storage import OFFSET_OLDEST, Log, LogConfig, Message, open_log, trim_by_offset
from seglog.storage.record.batch import parse_header

from ._batches import make_batch


def _files(path):
    return {n: (path / n).read_bytes() for n in sorted(os.listdir(path))}


def test_read_only_beside_live_writer(tmp_path):
    p = tmp_path / "p"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100)
    writer = Log.open(p, cfg, create=True)
    try:
        for _ in range(5):
            writer.append(make_batch(2))
        writer.sync()
        reader = Log.open(p, cfg, read_only=True)
        assert reader.log_end_offset == 10
        snapshot = _files(p)
        for _ in range(10):
            writer.append(make_batch(2))
        writer.sync()
        assert writer.stat()["segments"] > reader.stat()["segments"]
        # a read past the known end refreshes (new batches and new segments)
        assert reader.read(10, 1 << 20) != b""
        assert reader.log_end_offset == 30
        got = [parse_header(b).base_offset for b in reader.batches()]
        assert got == list(range(0, 30, 2))
        # a torn batch being written: the reader stops before it, touching nothing
        active = max(n for n in os.listdir(p) if n.endswith(".log"))
        half = make_batch(3)[:40]
        with open(p / active, "ab") as f:
            f.write(half)
        before = _files(p)
        assert reader.refresh() == 30
        assert reader.read(30, 100) == b""
        assert _files(p) == before
        with pytest.raises(ReadOnlyError):
            reader.append(make_batch(1))
        reader.close()
        assert set(snapshot) <= set(_files(p))
    finally:
        writer.close()


def test_read_only_open_of_crashed_log_changes_nothing(tmp_path):
    p = tmp_path / "p"
    with Log.open(p, create=True) as log:
        log.append(make_batch(2))
    seg = p / f"{0:020d}.log"
    (p / ".clean_shutdown").unlink()
    seg.write_bytes(seg.read_bytes() + b"\x00\x01garbage")
    before = _files(p)
    with Log.open(p, read_only=True) as ro:
        assert ro.log_end_offset == 2
        assert len(ro.read(0, 1000)) == len(before[seg.name]) - 9
    assert _files(p) == before


def test_missing_directory(tmp_path):
    with pytest.raises(DirectoryNotFoundError):
        Log.open(tmp_path / "nope")
    with pytest.raises(DirectoryNotFoundError):
        Log.open(tmp_path / "nope", read_only=True, create=True)


def test_read_slice_for_sendfile(tmp_path):
    with open_log(tmp_path / "p", create=True) as log:
        for i in range(5):
            log.publish([Message(value=b"x%d" % i)] * 3)
        fs = log.read_slice(4, 1)
        assert fs is not None
        assert os.pread(fs.fd, fs.size, fs.position) == log.read(4, 1)
        whole = log.read_slice(0, 1 << 20)
        assert whole is not None
        assert whole.size == len(log.read(0, 1 << 20))
        assert log.read_slice(15, 100) is None
        with pytest.raises(InvalidOffsetError):
            log.read_slice(16, 100)


def test_read_only_refresh_after_writer_rolled_and_trimmed_its_tail(tmp_path):
    """The reader's last segment filled up, rolled and was removed by retention before a
    refresh: the reader picks up the segments that remain (it used to stay at its old
    end forever, its log start clamped to it, every later record invisible)."""
    p = tmp_path / "p"
    with open_log(p, create=True, segment_messages=5, key_index=True) as writer:
        for i in range(12):  # segments 0, 5, 10 (holding 10, 11)
            writer.publish([Message(key=b"k%d" % (i % 2), value=b"%d" % i)])
        with open_log(p, read_only=True, key_index=True) as reader:
            assert reader.log_end_offset == 12
            for i in range(12, 30):  # segment 10 fills up; 15, 20, 25
                writer.publish([Message(key=b"k%d" % (i % 2), value=b"%d" % i)])
            trim_by_offset(writer, 20)  # removes 0, 5, 10, 15: the reader's tail too
            assert reader.refresh() == 30
            assert reader.log_start_offset == 20
            _, msgs = reader.consume(OFFSET_OLDEST, 100)
            assert [m.offset for m in msgs] == list(range(20, 30))
            assert reader.get_by_key(b"k0").offset == 28
            with pytest.raises(InvalidOffsetError):
                reader.get(12)
            writer.publish([Message(value=b"30")])
            assert reader.refresh() == 31
            assert reader.get(30).value == b"30"
