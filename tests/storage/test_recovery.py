"""Recovery on open, check and recover: torn tails, bit flips, indexes."""

from __future__ import annotations

import os
import pathlib

import pytest

from seglog.errors import LogCorruptedError
from seglog.storage import Log, LogConfig, check, recover
from seglog.storage.record.batch import parse_header

from ._batches import make_batch


def _fill(path: pathlib.Path, n: int, cfg: LogConfig | None = None, size: int = 20) -> list[int]:
    """n batches of 2 records; returns the byte position of each batch end (one segment)."""
    ends = []
    with Log.open(path, cfg, create=True) as log:
        for i in range(n):
            log.append(make_batch(2, value_size=size, tag=b"%d" % i))
            ends.append(log.stat()["bytes"] if log.stat()["segments"] == 1 else -1)
        log.sync()
    return ends


def _forget_recovery_point(p: pathlib.Path) -> None:
    """Look like a crash before any segment was known to be fully synced."""
    (p / ".clean_shutdown").unlink(missing_ok=True)
    (p / "recovery-point").unlink(missing_ok=True)


def _seg(path: pathlib.Path, base: int = 0) -> pathlib.Path:
    return path / f"{base:020d}.log"


def test_torn_tail_at_every_byte_recovers_to_previous_batch(tmp_path):
    p = tmp_path / "p"
    ends = _fill(p, 4)
    full = _seg(p).read_bytes()
    last_start = ends[-2]
    for cut in range(last_start, len(full)):
        _seg(p).write_bytes(full[:cut])
        (p / ".clean_shutdown").unlink(missing_ok=True)
        with Log.open(p) as log:
            assert log.log_end_offset == 6, cut
            assert os.path.getsize(_seg(p)) == last_start
            assert log.read(0, 1 << 20) == full[:last_start]
            # the log stays appendable at the right offset
            if cut == last_start + 7:
                assert log.append(make_batch(1)).base_offset == 6
                log.sync()
                assert parse_header(log.read(6, 100)).base_offset == 6


def test_garbage_tail_truncated_and_strict_open_refuses(tmp_path):
    p = tmp_path / "p"
    _fill(p, 3)
    full = _seg(p).read_bytes()
    (p / ".clean_shutdown").unlink()
    _seg(p).write_bytes(full + os.urandom(100))
    with pytest.raises(LogCorruptedError):
        Log.open(p, recover=False)
    assert _seg(p).read_bytes()[: len(full)] == full
    assert os.path.getsize(_seg(p)) == len(full) + 100  # strict open changed nothing
    reports = check(p)
    assert not reports[0].ok
    assert reports[0].torn_tail
    assert reports[0].valid_bytes == len(full)
    with Log.open(p) as log:
        assert log.log_end_offset == 6
    assert _seg(p).read_bytes() == full
    assert check(p)[0].ok


def test_bit_flip_detected_by_check_and_open(tmp_path):
    p = tmp_path / "p"
    ends = _fill(p, 6, LogConfig(segment_bytes=400))
    bases = sorted(int(n[:20]) for n in os.listdir(p) if n.endswith(".log"))
    assert len(bases) >= 2
    first = _seg(p, bases[0])
    data = bytearray(first.read_bytes())
    assert check(p)[0].ok
    for pos in (70, 17, 16, 8, 3):  # record bytes, crc, magic, batchLength, baseOffset
        flipped = bytearray(data)
        flipped[pos] ^= 0x10
        first.write_bytes(flipped)
        report = check(p)[0]
        assert not report.ok, pos
        assert not report.torn_tail
        assert first.read_bytes() == flipped  # check changes nothing
        # open after a crash with nothing known-good scans every segment: refuses
        _forget_recovery_point(p)
        with pytest.raises(LogCorruptedError):
            Log.open(p)
    first.write_bytes(data)
    assert check(p)[0].ok
    del ends


def test_recover_keeps_longest_valid_prefix(tmp_path):
    p = tmp_path / "p"
    _fill(p, 10, LogConfig(segment_bytes=400))
    bases = sorted(int(n[:20]) for n in os.listdir(p) if n.endswith(".log"))
    second = _seg(p, bases[1])
    data = bytearray(second.read_bytes())
    first_batch = parse_header(data).size
    data[first_batch + 70] ^= 1  # second batch of the second segment
    second.write_bytes(data)
    _forget_recovery_point(p)
    with pytest.raises(LogCorruptedError):
        Log.open(p)
    reports = recover(p)
    assert reports[0].removed_segments == bases[2:]
    assert reports[0].log_end_offset == bases[1] + 2
    assert check(p)[0].ok
    with Log.open(p) as log:
        assert log.log_end_offset == bases[1] + 2
        assert log.append(make_batch(1)).base_offset == bases[1] + 2


def _lookups(log: Log) -> list[object]:
    out: list[object] = [log.read(o, 1)[:12] for o in range(log.log_end_offset)]
    out += [log.offset_for_time(t) for t in (0, 5000, 10001, 10050, 99999)]
    return out


@pytest.mark.parametrize(
    "damage", ["missing", "odd", "garbage", "shifted", "time_missing", "time_garbage", "empty"]
)
def test_damaged_index_rebuilt_and_lookups_identical(tmp_path, damage):
    p = tmp_path / "p"
    cfg = LogConfig(index_interval_bytes=150)
    with Log.open(p, cfg, create=True) as log:
        for i in range(40):
            log.append(make_batch(2, timestamp=10000 + 10 * i))
        log.sync()
        before = _lookups(log)
    index, tindex = p / f"{0:020d}.index", p / f"{0:020d}.timeindex"
    good_index, good_tindex = index.read_bytes(), tindex.read_bytes()
    assert len(good_index) >= 8 * 10
    if damage == "missing":
        index.unlink()
    elif damage == "odd":
        index.write_bytes(good_index[:-3])
    elif damage == "garbage":
        index.write_bytes(os.urandom(len(good_index)))
    elif damage == "shifted":
        bad = bytearray(good_index)
        bad[-1] += 1  # last entry points inside a batch
        index.write_bytes(bad)
    elif damage == "time_missing":
        tindex.unlink()
    elif damage == "time_garbage":
        tindex.write_bytes(os.urandom(len(good_tindex)))
    elif damage == "empty":
        index.write_bytes(b"")
    with Log.open(p, cfg) as log:
        assert _lookups(log) == before
    assert index.read_bytes() == good_index
    assert check(p)[0].ok
    assert check(p)[0].index_problems == []


def test_check_reports_index_mismatch_without_fixing(tmp_path):
    p = tmp_path / "p"
    with Log.open(p, LogConfig(index_interval_bytes=100), create=True) as log:
        for _ in range(20):
            log.append(make_batch(2))
    index = p / f"{0:020d}.index"
    index.write_bytes(index.read_bytes()[:-8] + b"\x00\x00\x00\x07\x00\x00\x00\x09")
    damaged = index.read_bytes()
    report = check(p)[0]
    assert report.ok
    assert report.index_problems == [0]
    assert index.read_bytes() == damaged
    recover(p)
    assert check(p)[0].index_problems == []


def test_crash_after_roll_with_empty_new_segment(tmp_path):
    p = tmp_path / "p"
    _fill(p, 8, LogConfig(segment_bytes=300))
    bases = sorted(int(n[:20]) for n in os.listdir(p) if n.endswith(".log"))
    last = _seg(p, bases[-1])
    prev = _seg(p, bases[-2])
    (p / ".clean_shutdown").unlink()
    last.write_bytes(b"")
    prev.write_bytes(prev.read_bytes()[:-5])  # torn batch before an empty segment
    with Log.open(p, LogConfig(segment_bytes=300)) as log:
        end = log.log_end_offset
        assert end < bases[-1]
        assert log.append(make_batch(1)).base_offset == end
        log.sync()
    assert check(p)[0].ok


def test_plausible_wrong_middle_index_entry_still_reads_right(tmp_path):
    p = tmp_path / "p"
    cfg = LogConfig(index_interval_bytes=150)
    with Log.open(p, cfg, create=True) as log:
        for i in range(40):
            log.append(make_batch(2, timestamp=10000 + 10 * i))
        log.sync()
        before = _lookups(log)
    index = p / f"{0:020d}.index"
    entries = bytearray(index.read_bytes())
    k = len(entries) // 16 * 8  # a middle entry: claim the next batch's base offset
    rel = int.from_bytes(entries[k : k + 4], "big")
    entries[k : k + 4] = (rel + 2).to_bytes(4, "big")
    index.write_bytes(entries)
    with Log.open(p, cfg) as log:
        assert _lookups(log) == before
    assert check(p)[0].index_problems == [0]
    recover(p)
    assert check(p)[0].index_problems == []


def _lost_tail(p: pathlib.Path, keep_batches: int) -> tuple[list[int], int]:
    """A crash that kept a newer segment's name but not its predecessor's last writes (a
    directory fsync for another file made the name durable first): the last segment left
    empty, the one before it cut at a batch boundary after ``keep_batches`` batches.
    Returns the segment bases and the offset the surviving data ends at."""
    _fill(p, 8, LogConfig(segment_bytes=300))
    bases = sorted(int(n[:20]) for n in os.listdir(p) if n.endswith(".log"))
    prev, last = _seg(p, bases[-2]), _seg(p, bases[-1])
    data, pos, end = prev.read_bytes(), 0, bases[-2]
    for _ in range(keep_batches):
        header = parse_header(data, pos)
        pos += header.size
        end = header.last_offset + 1
    assert end < bases[-1]  # the cut lost at least one batch
    _forget_recovery_point(p)
    prev.write_bytes(data[:pos])  # a clean cut: no invalid byte anywhere
    last.write_bytes(b"")
    return bases, end


@pytest.mark.parametrize("keep_batches", [0, 1])
def test_lost_tail_before_an_empty_segment_ends_the_log_there(tmp_path, keep_batches):
    p = tmp_path / "p"
    bases, end = _lost_tail(p, keep_batches)
    before = sorted(os.listdir(p))
    with Log.open(p, LogConfig(segment_bytes=300), read_only=True) as log:
        assert log.log_end_offset == end
        offset, got = 0, []
        while offset < end:  # contiguous up to the end, no hole where the data was lost
            offset, msgs = log.consume(offset, 100)
            assert msgs
            got.extend(m.offset for m in msgs)
        assert got == list(range(end))
    assert sorted(os.listdir(p)) == before  # a read-only open changes nothing
    assert not check(p)[0].ok  # the hole is a problem until a writer recovers it
    with pytest.raises(LogCorruptedError):
        Log.open(p, LogConfig(segment_bytes=300), recover=False)
    with Log.open(p, LogConfig(segment_bytes=300)) as log:
        assert log.log_end_offset == end
        assert log.append(make_batch(1)).base_offset == end  # offsets assigned again
        log.sync()
    assert not _seg(p, bases[-1]).exists()  # the empty segment after the lost tail
    assert check(p)[0].ok
    with Log.open(p, LogConfig(segment_bytes=300), read_only=True) as log:
        offset, got = 0, []
        while offset < end + 1:
            offset, msgs = log.consume(offset, 100)
            got.extend(m.offset for m in msgs)
        assert got == list(range(end + 1))
