"""The retention pass closes idle segment handles (issue 7: handles bounded by what was
read recently, not one per segment for the broker's lifetime)."""

from __future__ import annotations

import os
import pathlib
import time

from seglog.broker.log.retention import IDLE_HANDLE_S, RetentionPolicy, RetentionTask
from seglog.storage import DataDir, Message
from seglog.storage.log.gc import MIN_IDLE_S


def _open_logs(directory: pathlib.Path) -> set[str]:
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)) and target.endswith(".log"):
            fds.add(target)
    return fds


def _task(dd: DataDir, idle_s: float) -> RetentionTask:
    keep = RetentionPolicy(
        delete=True,
        compact=False,
        retention_ms=-1,  # keep everything: only the handle GC acts
        retention_bytes=-1,
        delete_retention_ms=0,
        min_compaction_lag_ms=0,
    )
    return RetentionTask(dd, keep, interval_ms=60_000, idle_handle_s=idle_s)


def test_retention_pass_closes_idle_segment_handles(tmp_path: pathlib.Path) -> None:
    assert IDLE_HANDLE_S >= 60  # the broker's default keeps handles of recent reads
    with DataDir(tmp_path / "data", create=True) as dd:
        dd.create_topic("t", 2, {"segment.bytes": "500"})
        for p in range(2):
            log = dd.log("t", p)
            for i in range(20):
                log.publish([Message(value=b"v%d" % i + b"x" * 60)])
            log.sync()

        def paths(p: int) -> list[str]:
            plog = dd.log("t", p)
            return [str(plog.directory / f"{s.base_offset:020d}.log") for s in plog.segments()]

        segs = {p: paths(p) for p in range(2)}
        assert all(len(s) > 4 for s in segs.values())
        assert len(_open_logs(tmp_path)) == sum(len(s) for s in segs.values())
        _task(dd, IDLE_HANDLE_S).run_once()  # nothing idle that long: all stay open
        assert len(_open_logs(tmp_path)) == sum(len(s) for s in segs.values())
        time.sleep(MIN_IDLE_S + 0.05)  # past the readers' grace period (gc.MIN_IDLE_S)
        _task(dd, 0.0).run_once()
        # only the active segments keep a handle
        assert _open_logs(tmp_path) == {s[-1] for s in segs.values()}
        assert dd.log("t", 0).get(0).value.startswith(b"v0")  # a read reopens its segment
        assert segs[0][0] in _open_logs(tmp_path)
