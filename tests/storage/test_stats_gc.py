"""Stats per log and per segment, file operation counters, idle handle GC, read-only
open (every write path refused), many readers beside one writer. Tests taking
``make_log`` run on disk and in memory; a torn tail at reopen and the CLI on a directory
are disk-only."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from tests._wait import wait_until

from seglog import Message, open_log, storage
from seglog.errors import ReadOnlyError
from seglog.storage import Log, stat
from seglog.storage.log.gc import MIN_IDLE_S

from ._batches import make_batch
from ._fds import open_paths

MakeLog = Callable[..., Log]


def _open_fds() -> set[str]:
    return set(open_paths())


def test_stats_and_counters(make_log: MakeLog, backend: str) -> None:
    with make_log(segment_bytes=800, key_index=True) as log:
        p = log.directory
        for i in range(12):
            log.publish([Message(key=b"k%d" % (i % 3), value=b"x" * 40, timestamp=1000 + i)] * 3)
        st = log.stats()
        assert st.messages == 36
        assert st.batches == 12
        assert (st.log_start_offset, st.log_end_offset, st.high_watermark) == (0, 36, 36)
        assert (st.first_timestamp_ms, st.last_timestamp_ms) == (1000, 1011)
        assert len(st.segments) == log.stat()["segments"] > 2
        assert st.bytes == log.stat()["bytes"] == sum(s.bytes for s in st.segments)
        assert st.segments[0].base_offset == 0
        assert all(
            a.next_offset == b.base_offset
            for a, b in zip(st.segments, st.segments[1:], strict=False)
        )
        assert st.segments[-1].next_offset == 36
        assert st.index_bytes == sum(s.index_bytes + s.time_index_bytes for s in st.segments)
        assert st.key_index_keys == 3
        c = st.counters
        assert c["appends"] == 12
        assert c["rolls"] == len(st.segments) - 1
        assert c["opens"] == len(st.segments)
        assert 1 <= c["syncs"] <= 13
        assert c["appended_bytes"] == st.bytes
        assert c["errors"] == c["truncations"] == 0
    if backend != "disk":
        return
    # a torn tail cut at open counts as a truncation
    seg = p / f"{st.segments[-1].base_offset:020d}.log"
    with open(seg, "ab") as f:
        f.write(make_batch(2)[:30])
    (p / ".clean_shutdown").unlink()
    with open_log(p) as log:
        assert log.stats().counters["truncations"] == 1
    rows = stat(p)
    assert rows[0]["messages"] == 36
    assert rows[0]["format_version"] == 1
    assert len(rows[0]["segment_stats"]) == len(st.segments)  # type: ignore[arg-type]


def test_gc_closes_idle_handles_and_reopens(make_log: MakeLog) -> None:
    with make_log(segment_bytes=500) as log:
        p = log.directory
        for i in range(20):
            log.publish([Message(value=b"v%d" % i + b"x" * 60)])
        segs = log.stats().segments
        assert len(segs) > 4
        paths = {str(p / f"{s.base_offset:020d}.log") for s in segs}
        assert paths <= _open_fds()
        assert log.gc(0) == 0  # just used: within the readers' grace period
        time.sleep(MIN_IDLE_S + 0.05)
        closed = log.gc(0.01)
        assert closed == len(segs) - 1  # never the active segment
        left = paths & _open_fds()
        assert left == {str(p / f"{segs[-1].base_offset:020d}.log")}
        assert log.gc(0.01) == 0
        # reads reopen on demand, only what they touch
        assert (log.get(0).value or b"").startswith(b"v0")
        assert len(paths & _open_fds()) == 2
        assert [m.offset for m in log.consume(0, 100)[1]] == list(range(20))
        st = log.stats()
        assert st.counters["gc_closes"] == closed
        assert st.counters["opens"] == len(segs) + closed
        assert st.open_fds == len(segs)
        # periodic GC on a thread, stopped by close
        log.start_gc(every_s=0.05, unused_for_s=0.0)
        wait_until(lambda: sum(s.fd_open for s in log.segments()) == 1, timeout=20, interval=0.05)
    assert not any(t.name.startswith("seglog-gc") for t in threading.enumerate())
    assert not (paths & _open_fds())


def test_read_only_refuses_every_write_path(make_log: MakeLog, backend: str) -> None:
    log = make_log()
    p = log.directory
    log.publish([Message(key=b"k", value=b"v")])
    if backend == "disk":
        log.close()  # on disk the directory outlives its writer; a memory log's does not
    with open_log(p, read_only=True, key_index=True) as ro:
        for call in (
            lambda: ro.append(make_batch(1)),
            lambda: ro.publish([Message(value=b"x")]),
            lambda: ro.publish([]),
            lambda: storage.trim_by_age(ro, 0),
            lambda: storage.trim_by_count(ro, 0),
            lambda: storage.trim_by_offset(ro, 1),
            lambda: storage.trim_by_size(ro, 0),
            lambda: storage.compact(ro),
            lambda: storage.delete_offsets(ro, {0}),
        ):
            with pytest.raises(ReadOnlyError):
                call()
        assert ro.get_by_key(b"k").value == b"v"
        time.sleep(MIN_IDLE_S + 0.05)
        assert ro.gc(0) == 1  # read-only: even the last segment's handle
        assert ro.get(0).value == b"v"
    assert not (p / "key-index").exists()  # read-only never writes derived files either


def test_many_readers_beside_one_writer(make_log: MakeLog) -> None:
    n_msgs, errors = 200, []
    with make_log() as writer:
        p = writer.directory
        readers = [open_log(p, read_only=True) for _ in range(4)]

        def read(ro: Log) -> None:
            offset = 0
            try:
                while offset < n_msgs:
                    offset, msgs = ro.consume_blocking(offset, 50, 30)
                    for m in msgs:
                        assert m.value == b"%d" % m.offset
            except Exception as e:  # reported below
                errors.append(e)

        def write() -> None:
            for i in range(0, n_msgs, 10):
                writer.publish([Message(value=b"%d" % j) for j in range(i, i + 10)])

        threads = [threading.Thread(target=read, args=(r,)) for r in readers]
        threads += [threading.Thread(target=read, args=(writer,)) for _ in range(4)]
        threads.append(threading.Thread(target=write))
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for r in readers:
            assert r.next_offset() == n_msgs
            r.close()
    assert errors == []
