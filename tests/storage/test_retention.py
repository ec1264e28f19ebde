"""Retention: trim by age, size, count and offset; the log start offset; archive hook;
crash at each step. Tests taking ``make_log`` run on disk and in memory; reopen, archive
and crash tests are disk-only."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.storage._cleaner import Crash, abandon, all_messages, crash_at, keyed_log, leftover_files

import seglog
from seglog.errors import InvalidOffsetError
from seglog.storage import (
    Message,
    check,
    trim_by_age,
    trim_by_count,
    trim_by_offset,
    trim_by_size,
)
from seglog.storage.segment.swap import stepping

MakeLog = Callable[..., seglog.Log]


def _bases(log: seglog.Log) -> list[int]:
    return [s.base_offset for s in log.segments()]


def test_trim_by_age_removes_old_segments_never_the_active(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 120)
    bases = _bases(log)
    assert len(bases) > 5
    # every record is old: all closed segments go, the active one stays
    res = trim_by_age(log, 1_000, now_ms=10**12)
    assert res.segments == tuple(bases[:-1])
    assert res.bytes_freed > 0
    assert _bases(log) == [bases[-1]]
    assert log.log_start_offset == bases[-1] == res.log_start_offset
    msgs = all_messages(log)
    assert [m.offset for m in msgs] == list(range(bases[-1], 120))
    with pytest.raises(InvalidOffsetError, match="below the log start offset"):
        log.read(0, 1 << 20)
    with pytest.raises(InvalidOffsetError):
        log.get(bases[-1] - 1)
    assert not [f for f in os.listdir(log.directory) if f.startswith(f"{bases[0]:020d}")]
    log.close()


def test_trim_by_age_stops_at_the_first_young_segment(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 120)
    segs = log.segments()
    cut = segs[3].max_timestamp_ms  # segments 0..3 are older than or at cut
    res = trim_by_age(log, 0, now_ms=cut + 1)
    assert res.segments == tuple(s.base_offset for s in segs[:4])
    assert log.log_start_offset == segs[4].base_offset
    assert trim_by_age(log, 0, now_ms=cut + 1).segments == ()  # idempotent
    with pytest.raises(ValueError, match="max_age_ms"):
        trim_by_age(log, -1)
    log.close()


def test_trim_by_size_keeps_at_least_retention_bytes(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 120)
    total = sum(s.size for s in log.segments())
    limit = total // 2
    res = trim_by_size(log, limit)
    left = sum(s.size for s in log.segments())
    assert res.segments
    assert limit <= left < limit + max(s.size for s in log.segments())
    assert trim_by_size(log, limit).segments == ()
    res = trim_by_size(log, 0)  # everything but the active segment
    assert len(log.segments()) == 1
    assert all_messages(log)[0].offset == log.log_start_offset
    log.close()


def test_trim_by_count_moves_the_start_inside_a_segment(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 120)
    res = trim_by_count(log, 50)
    assert res.log_start_offset == 70 == log.log_start_offset
    assert [m.offset for m in all_messages(log)] == list(range(70, 120))
    assert all(s.base_offset <= 70 for s in log.segments()[:1])
    assert trim_by_count(log, 500).segments == ()  # fewer records than the limit
    assert log.log_start_offset == 70
    trim_by_count(log, 0)
    assert log.log_start_offset == 120
    assert all_messages(log) == []
    log.close()


def test_trim_by_offset_persists_and_readers_below_get_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 120)
    res = trim_by_offset(log, 55)
    assert res.log_start_offset == 55 == log.log_start_offset
    assert all(s.base_offset <= 55 for s in log.segments()[:1])
    assert log.segments()[0].base_offset < 55  # mid-segment: the segment stays
    assert log.get(55).offset == 55
    with pytest.raises(InvalidOffsetError, match="55"):
        log.consume(54, 10)
    with pytest.raises(InvalidOffsetError, match="below the log start offset 55"):
        log.read(54, 1 << 20)
    assert log.consume(seglog.OFFSET_OLDEST, 1)[1][0].offset == 55
    assert trim_by_offset(log, 10).log_start_offset == 55  # never backwards
    with pytest.raises(InvalidOffsetError, match="high watermark"):
        trim_by_offset(log, 121)
    log.close()
    with seglog.open_log(path) as log:
        assert log.log_start_offset == 55
        assert [m.offset for m in all_messages(log)] == list(range(55, 120))
        trim_by_offset(log, 120)  # up to the high watermark: the log reads empty
        assert log.log_start_offset == 120
        assert log.publish([Message(value=b"after")]) == 121
        assert [m.value for m in all_messages(log)] == [b"after"]
    with seglog.open_log(path, read_only=True) as ro:
        assert ro.log_start_offset == 120


def test_archive_hook_callable_receives_bak_files(tmp_path: Path) -> None:
    log = keyed_log(tmp_path / "orders-3", 60)
    first = log.segments()[0]
    expected = (log.directory / f"{first.base_offset:020d}.log").read_bytes()
    got: list[tuple[str, int, list[Path]]] = []

    def hook(topic: str, partition: int, files: list[Path]) -> None:
        got.append((topic, partition, files))

    res = trim_by_age(log, 0, now_ms=first.max_timestamp_ms + 1, archive=hook)
    assert res.segments == (first.base_offset,)
    assert len(got) == 1
    topic, partition, files = got[0]
    assert (topic, partition) == ("orders", 3)
    assert sorted(f.name for f in files) == sorted(
        f"{first.base_offset:020d}{s}.bak" for s in (".index", ".log", ".timeindex")
    )
    log_bak = next(f for f in files if f.name.endswith(".log.bak"))
    assert log_bak.read_bytes() == expected  # the hook owns them: still there
    log.close()
    with seglog.open_log(tmp_path / "orders-3") as log:  # the loader leaves .bak alone
        assert log_bak.exists()
        assert log.log_start_offset == res.log_start_offset


def test_archive_hook_command(tmp_path: Path) -> None:
    script = tmp_path / "archive.py"
    out = tmp_path / "archive"
    script.write_text(
        "import shutil, sys, pathlib\n"
        f"dest = pathlib.Path({str(out)!r}) / (sys.argv[1] + '.' + sys.argv[2])\n"
        "dest.mkdir(parents=True, exist_ok=True)\n"
        "for f in sys.argv[3:]: shutil.move(f, dest)\n"
    )
    log = keyed_log(tmp_path / "t-0", 60)
    n = len(log.segments()) - 1
    res = trim_by_size(log, 0, archive=[sys.executable, str(script)])
    assert len(res.segments) == n
    archived = sorted(p.name for p in (out / "t.0").iterdir())
    assert len(archived) == 3 * n
    assert all(name.endswith(".bak") for name in archived)
    assert not [f for f in os.listdir(tmp_path / "t-0") if f.endswith(".bak")]
    log.close()


def test_loader_removes_leftover_deleted_files(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    keyed_log(path, 30).close()
    (path / f"{0:020d}.log.deleted").write_bytes(b"junk")
    (path / f"{7:020d}.index.deleted").write_bytes(b"junk")
    with seglog.open_log(path) as log:
        assert leftover_files(path) == []
        assert len(all_messages(log)) == 30


@pytest.mark.parametrize("step", ["checkpoint", "renamed", "unlinked"])
@pytest.mark.parametrize("nth", [1, 2])
def test_crash_at_each_retention_step(tmp_path: Path, step: str, nth: int) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 90)
    before = all_messages(log)
    target = log.segments()[3].base_offset
    with pytest.raises(Crash), stepping(crash_at(step, 1 if step == "checkpoint" else nth)):
        trim_by_offset(log, target)
    abandon(log)
    with seglog.open_log(path) as log:
        # the commit point is the checkpoint: afterwards the new start holds
        assert log.log_start_offset == target
        assert all_messages(log) == [m for m in before if m.offset >= target]
        assert leftover_files(path) == []
        res = trim_by_offset(log, target)  # finishes: removes what is wholly below
        assert log.segments()[0].base_offset == target
        assert all(b < target for b in res.segments)
    assert all(r.ok for r in check(path))
