"""``Log.adopt``: a file of record batches moved into the log as its new active segment."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from seglog.errors import CorruptRecordError, InvalidRecordError, StorageError
from seglog.storage import Log, check, open_log
from seglog.storage.record.batch import parse_header
from seglog.storage.segment.segment import Segment

from ._batches import make_batch


def _stage(path: pathlib.Path, batches: int, records: int = 4, tag: bytes = b"s") -> list[bytes]:
    """Write ``batches`` batches of ``records`` records to ``path``; their values."""
    path.write_bytes(b"".join(make_batch(records, tag=tag + b"%d" % i) for i in range(batches)))
    return [
        (tag + b"%d-%d-" % (i, j)).ljust(20, b"x") for i in range(batches) for j in range(records)
    ]


def _segments(directory: pathlib.Path) -> list[int]:
    return sorted(int(p.stem) for p in directory.glob("*.log"))


def test_adopt_after_appends_rolls_and_moves_the_file(tmp_path: pathlib.Path) -> None:
    staged = tmp_path / "staged"
    with open_log(tmp_path / "log", create=True) as log:
        log.append(make_batch(2, tag=b"a"))
        values = _stage(staged, 5)
        inode = os.stat(staged).st_ino
        info = log.adopt(staged)
        assert (info.base_offset, info.last_offset, info.record_count) == (2, 21, 20)
        assert not staged.exists()
        assert os.stat(tmp_path / "log" / f"{2:020d}.log").st_ino == inode  # moved, not copied
        assert _segments(tmp_path / "log") == [0, 2]
        log.sync()
        assert log.high_watermark == 22
        log.append(make_batch(1, tag=b"z"))  # later appends go to the adopted segment
        log.sync()
        assert _segments(tmp_path / "log") == [0, 2]
        _, messages = log.consume(0, 100)
        assert [m.offset for m in messages] == list(range(23))
        assert [m.value for m in messages[2:22]] == values
        assert [log.get(o).value for o in (2, 13, 21)] == [values[0], values[11], values[19]]
        # every adopted batch's header names its offsets
        raw = (tmp_path / "log" / f"{2:020d}.log").read_bytes()
        assert parse_header(raw, 0).base_offset == 2
    [report] = check(tmp_path / "log")
    assert not report.problems
    assert not report.index_problems
    with open_log(tmp_path / "log") as log:
        _, again = log.consume(0, 100)
        assert [m.value for m in again] == [m.value for m in messages]


def test_adopt_replaces_an_empty_active_segment(tmp_path: pathlib.Path) -> None:
    staged = tmp_path / "staged"
    with open_log(tmp_path / "log", create=True) as log:
        values = _stage(staged, 3)
        log.adopt(staged)
        log.sync()
        assert _segments(tmp_path / "log") == [0]
        assert [m.value for m in log.consume(0, 100)[1]] == values
        # the time index answers from the adopted segment's headers
        first_ts = log.get(0).timestamp
        assert log.offset_by_time(first_ts + 1)[0] == 1
    [report] = check(tmp_path / "log")
    assert not report.problems
    assert not report.index_problems


def test_adopt_refuses_a_corrupt_file_and_leaves_log_and_file(tmp_path: pathlib.Path) -> None:
    staged = tmp_path / "staged"
    with open_log(tmp_path / "log", create=True) as log:
        log.append(make_batch(2))
        _stage(staged, 3)
        data = bytearray(staged.read_bytes())
        data[-3] ^= 0x40  # a bit flip in the last batch's records: its CRC-32C fails
        staged.write_bytes(data)
        with pytest.raises(CorruptRecordError):
            log.adopt(staged)
        assert staged.read_bytes() == data
        staged.write_bytes(b"")
        with pytest.raises(InvalidRecordError):
            log.adopt(staged)
        assert log.log_end_offset == 2
        assert _segments(tmp_path / "log") == [0]


def test_adopt_copies_what_cannot_be_a_segment(make_log, tmp_path: pathlib.Path) -> None:
    """Bigger than segment.bytes (and, for the memory log, on another filesystem): the
    batches are appended by copy and the file removed, with the same outcome."""
    staged = tmp_path / "staged"
    with make_log(segment_bytes=200) as log:
        values = _stage(staged, 3)
        assert staged.stat().st_size > 200
        info = log.adopt(staged)
        assert info.record_count == 12
        assert not staged.exists()
        log.sync()
        assert [m.value for m in log.consume(0, 100)[1]] == values


def _segment_counts(log: Log) -> list[tuple[int, int]]:
    """(base offset, offsets held) of each segment, oldest first."""
    segs = log.segments()
    ends = [s.base_offset for s in segs[1:]] + [log.log_end_offset]
    return [(s.base_offset, end - s.base_offset) for s, end in zip(segs, ends, strict=True)]


def test_adopt_respects_segment_messages(make_log, tmp_path: pathlib.Path) -> None:
    """seglog.segment.messages holds for adopted records as for appended ones: a file
    with more records than a segment takes is split at batch boundaries, filling the
    active segment first, as appends of its batches one by one would."""
    staged = tmp_path / "staged"
    with make_log(segment_messages=5) as log:
        log.append(make_batch(2, tag=b"a"))
        values = _stage(staged, 20, records=1)
        info = log.adopt(staged)
        assert (info.base_offset, info.last_offset, info.record_count) == (2, 21, 20)
        assert not staged.exists()
        log.sync()
        assert _segment_counts(log) == [(0, 5), (5, 5), (10, 5), (15, 5), (20, 2)]
        assert [m.value for m in log.consume(2, 100)[1]] == values
        log.append(make_batch(4, tag=b"z"))  # appends go on by the same rule
        assert _segment_counts(log)[-2:] == [(20, 2), (22, 4)]


def test_adopt_within_segment_messages_still_moves(tmp_path: pathlib.Path) -> None:
    staged = tmp_path / "staged"
    with open_log(tmp_path / "log", create=True, segment_messages=8) as log:
        log.append(make_batch(2))
        _stage(staged, 2)  # 8 records: one segment's worth
        inode = os.stat(staged).st_ino
        log.adopt(staged)
        assert os.stat(tmp_path / "log" / f"{2:020d}.log").st_ino == inode
        assert _segment_counts(log) == [(0, 2), (2, 8)]
    [report] = check(tmp_path / "log")
    assert not report.problems


def test_adopt_copy_respects_segment_bytes(make_log, tmp_path: pathlib.Path) -> None:
    """A file over segment.bytes is copied in segment-sized groups of whole batches, not
    into one oversized segment."""
    staged = tmp_path / "staged"
    batch = len(make_batch(1))
    with make_log(segment_bytes=3 * batch) as log:
        values = _stage(staged, 10, records=1)
        log.adopt(staged)
        log.sync()
        assert [s.size for s in log.segments()] == [3 * batch] * 3 + [batch]
        assert [m.value for m in log.consume(0, 100)[1]] == values


def test_adopt_copy_failing_midway_keeps_whole_groups_and_the_file(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write error in the second group: the first stays in the log (whole batches), the
    file stays where it was, the error is raised (the Spark sink replays the rest)."""
    staged = tmp_path / "staged"
    writes = 0
    real_append = Segment.append

    def failing_second(self: Segment, *args: Any) -> None:
        nonlocal writes
        writes += 1
        if writes == 2:
            raise StorageError("simulated ENOSPC")
        real_append(self, *args)

    with open_log(tmp_path / "log", create=True, segment_messages=4) as log:
        values = _stage(staged, 3)  # 12 records: three groups of one batch
        data = staged.read_bytes()
        monkeypatch.setattr(Segment, "append", failing_second)
        with pytest.raises(StorageError, match="simulated ENOSPC"):
            log.adopt(staged)
        monkeypatch.undo()
        assert log.log_end_offset == 4
        assert staged.exists()
        assert staged.read_bytes()[61:] == data[61:]  # the records themselves untouched
        log.sync()
        assert [m.value for m in log.consume(0, 100)[1]] == values[:4]


def test_adopt_under_log_append_time_and_relaxed_flush(tmp_path: pathlib.Path) -> None:
    staged = tmp_path / "staged"
    with open_log(
        tmp_path / "log", create=True, message_timestamp_type="LogAppendTime", flush_messages=1000
    ) as log:
        log.append(make_batch(1, timestamp=5))
        _stage(staged, 2)
        info = log.adopt(staged)
        assert info.log_append_time_ms > 0
        assert log.high_watermark == 9  # relaxed: visible at once
        assert {m.timestamp for m in log.consume(1, 100)[1]} == {info.log_append_time_ms}
    [report] = check(tmp_path / "log")  # the recomputed CRCs hold
    assert not report.problems


def test_adopt_feeds_the_key_index(tmp_path: pathlib.Path) -> None:
    staged = tmp_path / "staged"
    with open_log(tmp_path / "log", create=True, key_index=True) as log:
        log.append(make_batch(2, tag=b"old"))
        values = _stage(staged, 1, records=3)
        log.adopt(staged)
        log.sync()
        assert log.get_by_key(b"k1").value == values[1]
        assert log.offset_by_key(b"k1") == 3


def test_a_file_patched_by_an_unfinished_adopt_is_adopted_again(tmp_path: pathlib.Path) -> None:
    """A crash after the offsets were patched but before the rename leaves a file whose
    headers name offsets the log never took: adopting it again patches them anew."""
    staged = tmp_path / "staged"
    values = _stage(staged, 2)
    data = bytearray(staged.read_bytes())
    data[0:8] = (12345).to_bytes(8, "big")  # baseOffset is outside the CRC
    staged.write_bytes(data)
    with open_log(tmp_path / "log", create=True) as log:
        log.append(make_batch(3))
        log.adopt(staged)
        log.sync()
        assert [m.offset for m in log.consume(3, 100)[1]] == list(range(3, 11))
        assert [m.value for m in log.consume(3, 100)[1]] == values


_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    from storage._batches import make_batch
    from seglog.storage import open_log
    log = open_log(sys.argv[1] + "/log", create=True)
    for i in range(3):
        log.append(make_batch(2, tag=b"a%d" % i))
        with open(sys.argv[1] + "/staged", "wb") as f:
            f.write(b"".join(make_batch(4, tag=b"s%d-%d" % (i, j)) for j in range(50)))
        log.adopt(sys.argv[1] + "/staged")
        log.sync()
    print("synced", log.log_end_offset, flush=True)
    sys.stdin.read()  # until killed
    """
)


def test_adopted_segments_survive_kill_9(tmp_path: pathlib.Path) -> None:
    tests_dir = str(pathlib.Path(__file__).parent.parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path), tests_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["synced", str(3 * (2 + 200))]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not (tmp_path / "log" / ".clean_shutdown").exists()
    with open_log(tmp_path / "log") as log:
        assert log.log_end_offset == 606
        _, messages = log.consume(0, 1000)
        assert [m.offset for m in messages] == list(range(606))
        assert messages[2].value.startswith(b"s0-0-0")
        assert messages[202].value.startswith(b"a1-0")
        assert messages[204].value.startswith(b"s1-0-0")
    [report] = check(tmp_path / "log")
    assert not report.problems
    assert not report.index_problems


@pytest.mark.parametrize("how", ["append", "adopt"])
def test_undecodable_records_are_stored_without_their_keys(
    tmp_path: pathlib.Path, how: str
) -> None:
    """A CRC-valid batch whose records do not decode: stored (the key index only lacks
    its keys, logged), the same through append and adopt."""
    import crc32c  # noqa: PLC0415

    data = bytearray(make_batch(2))
    data[61] = 0x7F  # the first record's length varint: far past the batch end
    data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    staged = tmp_path / "staged"
    staged.write_bytes(data)
    with open_log(tmp_path / "log", create=True, key_index=True) as log:
        log.append(make_batch(1))
        info = log.append(bytes(data)) if how == "append" else log.adopt(staged)
        assert (info.base_offset, info.record_count) == (1, 2)
        assert log.log_end_offset == 3
