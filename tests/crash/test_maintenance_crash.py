"""A crash at every step of compaction, retention, delete by offsets and backup.

Generic: the operation runs in a forked child that SIGKILLs itself just before its N-th
file-mutating call (rename, unlink, write, fsync, open for writing...; see
``_writer._kill_at``), for N = 1, 2, ... until the operation completes. After each crash
the log is reopened (crash recovery finishes or rolls back interrupted swaps) and must
hold the old or the new state, per segment, never a mix, nothing else lost, and take
appends at the same log end offset.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any

import pytest

from seglog.storage import Log, LogConfig, Message, check, restore, snapshot

from ._harness import Zygote
from ._mounts import lazy_mount
from .conftest import record_figure

CONFIG = {"segment_bytes": 500, "index_interval_bytes": 150}
State = dict[int, tuple[bytes | None, bytes | None]]
# crash before every rename/unlink/fsync/truncate/open-for-write; SEGLOG_CRASH_WRITES=1
# also before every write() (3-4x the crash points: scripts/soak.py sets it)
WRITES = os.environ.get("SEGLOG_CRASH_WRITES") == "1"


def _fill(p: pathlib.Path) -> None:
    with Log.open(p, LogConfig(**CONFIG), create=True) as log:
        for i in range(20):
            msgs = []
            for j in range(4):
                o = i * 4 + j
                value = None if o % 11 == 5 else b"v%d" % o * 3  # some tombstones
                msgs.append(Message(key=b"k%d" % (o % 13), value=value, timestamp=1000 + o))
            log.publish(msgs)


def _state(p: pathlib.Path) -> tuple[int, int, State]:
    """(log start offset, log end offset, {offset: (key, value)}) after crash recovery."""
    with Log.open(p, LogConfig(**CONFIG)) as log:
        start, end = log.log_start_offset, log.log_end_offset
        out: State = {}
        offset = start
        while offset < end:
            nxt, msgs = log.consume(offset, 10_000)
            for m in msgs:
                out[m.offset] = (m.key, m.value)
            if nxt <= offset:
                break
            offset = nxt
    return start, end, out


def _segment_ranges(p: pathlib.Path, end: int) -> list[tuple[int, int]]:
    bases = sorted(int(n[:20]) for n in os.listdir(p) if n.endswith(".log"))
    return list(zip(bases, [*bases[1:], end], strict=True))


def _run(
    zygote: Zygote,
    pristine: pathlib.Path,
    work: pathlib.Path,
    op: str,
    args: dict[str, Any],
    kill_at: int,
) -> tuple[str, int]:
    """Fresh copy of the pristine log in ``work``, then the operation crashing at step
    ``kill_at``: ``("killed", 0)`` or ``("done", steps)``."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    spec = {
        "path": str(work / "p"),
        "config": CONFIG,
        "op": op,
        "args": args,
        "kill_at": kill_at,
        "writes": WRITES,
    }
    return zygote.run_op(spec)


def _check_old_or_new(op: str, ranges, before: State, after: State, got: State, n: int):
    if op.startswith("trim"):
        # retention: a suffix of the old log, containing the new one
        assert set(after) <= set(got) <= set(before), (op, n)
        assert set(got) == {o for o in before if o >= min(got, default=0)}, (op, n)
    else:
        assert set(after) <= set(got) <= set(before), (op, n)
        for lo, hi in ranges:  # each segment: the old or the new one, never a mix
            seg = {o: v for o, v in got.items() if lo <= o < hi}
            old = {o: v for o, v in before.items() if lo <= o < hi}
            new = {o: v for o, v in after.items() if lo <= o < hi}
            assert seg in (old, new), f"{op}: segment {lo} mixed after a crash at step {n}"
    for o, v in got.items():
        assert before[o] == v, (op, n, o)  # nothing altered


OPS = [
    ("compact", {"now_ms": 10**13, "delete_retention_ms": 0}),
    ("delete_offsets", {"offsets": [1, 2, 9, 30, 31, 32, 33, 50, 77]}),
    ("trim_by_offset", {"before": 42}),
    ("trim_by_count", {"max_messages": 30}),
    ("trim_by_size", {"max_bytes": 1500}),
]


@pytest.mark.parametrize(("op", "args"), OPS, ids=[o for o, _ in OPS])
def test_crash_at_every_step_leaves_old_or_new_state(shm_path, zygote, op, args):
    pristine = shm_path / "pristine"
    _fill(pristine / "p")
    start0, end0, before = _state(pristine / "p")
    ranges = _segment_ranges(pristine / "p", end0)
    assert len(ranges) >= 5
    work = shm_path / "work"
    result, steps = _run(zygote, pristine, work, op, args, 10**9)
    assert result == "done"
    _, end_after, after = _state(work / "p")
    assert end_after == end0
    assert after != before, f"{op} changed nothing: the test would prove nothing"
    crashes = 0
    states = set()
    for n in range(1, steps + 2):
        result, _ = _run(zygote, pristine, work, op, args, n)
        if result == "done":
            break
        _, e, got = _state(work / "p")
        assert e == end0, f"{op}: log end offset moved after a crash at step {n}"
        _check_old_or_new(op, ranges, before, after, got, n)
        assert all(r.ok for r in check(work / "p")), (op, n)
        with Log.open(work / "p", LogConfig(**CONFIG)) as log:
            assert log.publish([Message(key=b"x", value=b"after crash")]) == end0 + 1
        states.add(tuple(sorted(got)))
        crashes += 1
    writes = " incl. writes" if WRITES else ""
    record_figure(
        f"crash during {op}: {crashes} crash points (before each of its {steps} "
        f"file-mutating calls{writes}), {len(states)} distinct recovered states, "
        "each old or new per segment, nothing else lost"
    )
    assert crashes == steps + (1 if WRITES else 0)  # (+1: the "done" report's write)
    assert steps >= 3
    del start0


@pytest.mark.parametrize("op", ["backup", "snapshot", "restore"])
def test_crash_at_every_step_of_a_backup_snapshot_restore(shm_path, zygote, op):
    """The source is never harmed; the backup, snapshot file or restored directory is
    absent or whole (restoring it gives the source's messages)."""
    pristine = shm_path / "pristine"
    _fill(pristine / "p")
    _, end0, before = _state(pristine / "p")
    if op == "restore":
        with Log.open(pristine / "p", LogConfig(**CONFIG)) as log:
            snapshot(log, pristine / "snap.tar")
    work = shm_path / "work"
    crashes = complete = steps = 0
    for n in range(1, 1000):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)
        target = work / ("snap.tar" if op == "snapshot" else "copy")
        args = {
            "backup": {"dest": str(target)},
            "snapshot": {"out": str(target)},
            "restore": {"src": str(work / "snap.tar"), "dest": str(target)},
        }[op]
        spec = {"path": str(work / "p"), "config": CONFIG, "op": op, "args": args}
        result, steps = zygote.run_op({**spec, "kill_at": n, "writes": WRITES})
        assert _state(work / "p")[2] == before  # the source is never harmed
        if target.exists():  # what exists is whole
            if op == "snapshot":
                restore(target, work / "restored")
                got = _state(work / "restored")
            else:
                got = _state(target)
            assert got[1] == end0, (op, n)
            assert got[2] == before, (op, n)
            complete += 1
        if result == "done":
            break
        crashes += 1
    record_figure(
        f"crash during {op}: {crashes} crash points ({steps} file-mutating calls), source "
        f"intact each time, result absent or whole ({complete} whole)"
    )
    assert crashes >= 3


def _durable_copy(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Copy the directory tree ``src`` to ``dst`` with every file and directory fsynced
    (so a power loss on the lazy filesystem keeps exactly this starting state)."""
    shutil.rmtree(dst, ignore_errors=True)
    for d, _, names in os.walk(src):
        target = dst / pathlib.Path(d).relative_to(src)
        target.mkdir(parents=True)
        for n in names:
            fd = os.open(target / n, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.write(fd, (pathlib.Path(d) / n).read_bytes())
                os.fsync(fd)
            finally:
                os.close(fd)
    for d, _, _ in os.walk(dst):
        fd = os.open(d, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    fd = os.open(dst.parent, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


# every crash point with SEGLOG_CRASH_ALL_POINTS=1 (scripts/soak.py), else every 5th
POWER_EVERY = 1 if os.environ.get("SEGLOG_CRASH_ALL_POINTS") == "1" else 5


@pytest.mark.parametrize(
    ("op", "args"), [OPS[0], OPS[1], OPS[3]], ids=[OPS[0][0], OPS[1][0], OPS[3][0]]
)
def test_power_loss_during_maintenance_leaves_old_or_new_state(
    tmp_path, shm_path, zygote, op, args
):
    """As above, but the power goes right after the kill: whatever the operation had not
    fsynced (data, renames, unlinks) is dropped by the lazy FUSE filesystem."""
    pristine = shm_path / "pristine"
    _fill(pristine / "p")
    _, end0, before = _state(pristine / "p")
    ranges = _segment_ranges(pristine / "p", end0)
    result, steps = _run(zygote, pristine, shm_path / "work", op, args, 10**9)
    assert result == "done"
    _, _, after = _state(shm_path / "work" / "p")
    crashes = 0
    with lazy_mount(tmp_path / "mnt") as fs:
        work = fs.path / "work"
        for n in range(1, steps + 2, POWER_EVERY):
            _durable_copy(pristine, work)
            spec = {"path": str(work / "p"), "config": CONFIG, "op": op, "args": args}
            result, _ = zygote.run_op({**spec, "kill_at": n, "writes": WRITES})
            fs.power_loss()
            _, e, got = _state(work / "p")
            assert e == end0, f"{op}: log end offset moved after power loss at step {n}"
            _check_old_or_new(op, ranges, before, after, got, n)
            assert all(r.ok for r in check(work / "p")), (op, n)
            crashes += 1
    record_figure(
        f"power loss during {op}: {crashes} crash points (every {POWER_EVERY}. of "
        f"{steps} file-mutating calls) + dropped unsynced writes, old or new state each time"
    )
    assert crashes >= 3
