"""Delete by offsets (klevdb's Delete), crash at each step, and gap rules of the loader.
Tests taking ``make_log`` run on disk and in memory (the reopen part on disk only); the
crash and loader tests are disk-only."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.storage._cleaner import Crash, abandon, all_messages, crash_at, keyed_log, leftover_files

import seglog
from seglog.errors import NotFoundError
from seglog.storage import Message, check, delete_offsets
from seglog.storage.fileio.files import CLEANER_CHECKPOINT
from seglog.storage.segment.swap import stepping

MakeLog = Callable[..., seglog.Log]


def test_delete_offsets_returns_what_was_deleted(make_log: MakeLog, backend: str) -> None:
    log = keyed_log(make_log, 100)
    path = log.directory
    before = all_messages(log)
    active = log.segments()[-1].base_offset
    wanted = {0, 1, 17, 18, 19, 42, 98, active, 1000, -5}
    res = delete_offsets(log, wanted)
    assert set(res.offsets) == {o for o in wanted if 0 <= o < 100}  # the active one too
    assert res.bytes_freed > 0
    after = all_messages(log)
    assert after == [m for m in before if m.offset not in set(res.offsets)]
    for o in res.offsets:
        with pytest.raises(NotFoundError):
            log.get(o)
    assert log.get(99).offset == 99
    assert (log.log_start_offset, log.log_end_offset) == (0, 100)  # offset 0 gone: start stays
    assert delete_offsets(log, res.offsets).offsets == []  # already gone
    log.close()
    if backend == "memory":
        return  # gone with the close; on disk, a reopen finds the same records
    with seglog.open_log(path) as log:
        assert all_messages(log) == after
    assert all(r.ok for r in check(path))


def test_delete_in_the_active_segment_rolls_it_first(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 30, segment_bytes=1 << 20)  # one segment: all of it active
    assert [s.base_offset for s in log.segments()] == [0]
    before = all_messages(log)
    res = delete_offsets(log, [5, 6, 29, 30])
    assert res.offsets == [5, 6, 29]  # 30 is the log end: not stored
    assert res.bytes_freed > 0
    assert [s.base_offset for s in log.segments()] == [0, 30]  # rolled at the end
    assert log.counters.rolls == 1
    after = all_messages(log)
    assert after == [m for m in before if m.offset not in {5, 6, 29}]
    for o in (5, 6, 29):
        with pytest.raises(NotFoundError):
            log.get(o)
    assert (log.log_start_offset, log.log_end_offset) == (0, 30)
    # later appends continue at the right offsets, in the new active segment
    assert log.publish([Message(key=b"k0", value=b"v30")]) == 31
    assert log.get(30).value == b"v30"
    assert delete_offsets(log, [31]).offsets == []  # past the end: no roll
    assert [s.base_offset for s in log.segments()] == [0, 30]
    log.close()
    with seglog.open_log(path) as log:
        assert [m.offset for m in all_messages(log)] == [
            o for o in range(31) if o not in {5, 6, 29}
        ]
        assert log.publish([Message(key=None, value=b"v31")]) == 32
    assert all(r.ok for r in check(path))


def test_delete_in_an_empty_active_segment_does_not_roll(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    with seglog.open_log(path, create=True) as log:
        assert delete_offsets(log, [0, 1]).offsets == []
        assert log.counters.rolls == 0


@pytest.mark.parametrize("step", ["cleaned", "swap", "log-live", "indexes-live"])
def test_crash_deleting_in_the_active_segment(tmp_path: Path, step: str) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 20, segment_bytes=1 << 20)
    doomed = {3, 17}
    with pytest.raises(Crash), stepping(crash_at(step)):
        delete_offsets(log, doomed)
    abandon(log)
    with seglog.open_log(path) as log:
        assert leftover_files(path) == []
        got = {m.offset for m in all_messages(log)}
        if step == "cleaned":
            assert got == set(range(20))  # not committed: old state
        else:
            assert got == set(range(20)) - doomed  # committed: new state
        assert log.log_end_offset == 20
        assert log.publish([Message(key=None, value=b"v20")]) == 21
        delete_offsets(log, doomed)
        assert {m.offset for m in all_messages(log)} == set(range(21)) - doomed
    assert all(r.ok for r in check(path))


def test_delete_a_whole_segment_keeps_offsets(make_log: MakeLog, backend: str) -> None:
    log = keyed_log(make_log, 60)
    path = log.directory
    seg = log.segments()[1]
    res = delete_offsets(log, range(seg.base_offset, seg.next_offset))
    assert res.offsets == list(range(seg.base_offset, seg.next_offset))
    assert log.segments()[1].size == 0
    assert log.segments()[1].base_offset == seg.base_offset
    _nxt, msgs = log.consume(seg.base_offset, 1)
    assert msgs[0].offset == seg.next_offset
    log.close()
    if backend == "memory":
        return  # gone with the close; on disk, a reopen keeps the offsets
    with seglog.open_log(path) as log:
        assert [m.offset for m in all_messages(log)] == [
            o for o in range(60) if not seg.base_offset <= o < seg.next_offset
        ]


@pytest.mark.parametrize("step", ["cleaned", "swap", "log-live", "indexes-live"])
def test_crash_at_each_delete_step(tmp_path: Path, step: str) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 80)
    before = all_messages(log)
    doomed = {3, 4, 30, 31, 32}
    with pytest.raises(Crash), stepping(crash_at(step, 2)):  # 2nd segment rewritten
        delete_offsets(log, doomed)
    abandon(log)
    with seglog.open_log(path) as log:
        assert leftover_files(path) == []
        got = {m.offset for m in all_messages(log)}
        first_done = {3, 4}  # the first segment's delete finished before the crash
        second = {30, 31, 32}
        assert not got & first_done
        if step == "cleaned":
            assert second <= got  # old state of the second segment
        else:
            assert not got & second  # committed: new state
        assert got | doomed == {m.offset for m in before}
        res = delete_offsets(log, doomed)
        assert {m.offset for m in all_messages(log)} == {m.offset for m in before} - doomed
        assert set(res.offsets) <= second
    assert all(r.ok for r in check(path))


def _bump_base_offset(path: Path, position: int, delta: int) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        (base,) = struct.unpack(">q", f.read(8))
        f.seek(position)
        f.write(struct.pack(">q", base + delta))


def test_a_gap_outside_the_cleaned_range_is_still_corruption(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    keyed_log(path, 40, segment_bytes=1 << 20).close()  # one segment, one batch per message
    # move the last batch's base offset up by one: a gap the cleaner never made
    data = (path / f"{0:020d}.log").read_bytes()
    pos = 0
    while True:
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos + size == len(data):
            break
        pos += size
    _bump_base_offset(path / f"{0:020d}.log", pos, 1)
    reports = check(path)
    assert not reports[0].ok
    # the same gap inside the range the cleaner rewrote is legal
    (path / CLEANER_CHECKPOINT).write_text("41\n")
    assert check(path)[0].ok
    with seglog.open_log(path) as log:
        assert [m.offset for m in all_messages(log)][-2:] == [38, 40]
        assert log.log_end_offset == 41
