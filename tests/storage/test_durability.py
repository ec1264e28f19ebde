"""Group commit, relaxed flush, callbacks, and kill -9 of a publishing process."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from tests._wait import wait_until

from seglog.errors import LogClosedError
from seglog.storage import Log, LogConfig, Message, open_log
from seglog.storage.record.batch import check_stored_batch

from ._batches import make_batch
from ._threads import with_sync_thread


def test_group_commit_shares_fsyncs(tmp_path):
    threads, per_thread = 8, 40
    results: list[tuple[int, int]] = []
    lock = threading.Lock()
    with Log.open(tmp_path / "p", create=True) as log:

        def work() -> None:
            for _ in range(per_thread):
                info = log.append(make_batch(2))
                durable = log.sync_future(info.last_offset + 1).result(timeout=30)
                assert durable >= info.last_offset + 1
                with lock:
                    results.append((info.base_offset, info.last_offset))

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        appends = threads * per_thread
        assert len(results) == appends
        assert log.append_count == appends
        assert 0 < log.fsync_count < appends
        offsets = sorted(o for b, last in results for o in range(b, last + 1))
        assert offsets == list(range(2 * appends))
        assert log.high_watermark == 2 * appends


def test_high_watermark_waits_for_fsync_and_callbacks_fire(tmp_path):
    seen: list[int] = []
    event = threading.Event()
    with Log.open(tmp_path / "p", create=True) as log:

        def cb(hw: int) -> None:
            seen.append(hw)
            if hw >= 3:
                event.set()

        unregister = log.on_append(cb)
        log.append(make_batch(3))
        assert event.wait(10)
        assert log.high_watermark == 3
        assert seen[-1] == 3
        unregister()
        log.append(make_batch(1))
        log.sync()
        assert seen[-1] == 3


def test_relaxed_flush_visible_at_once(tmp_path):
    cfg = LogConfig(flush_messages=1000, flush_ms=20)
    with Log.open(tmp_path / "p", cfg, create=True) as log:
        log.append(make_batch(2))
        assert log.high_watermark == 2
        assert log.read(0, 100) != b""
        wait_until(lambda: log.fsync_count >= 1, timeout=10, message="flush.ms timer never ran")


def test_sync_future_after_close_fails(tmp_path):
    log = Log.open(tmp_path / "p", create=True)
    log.append(make_batch(1))
    log.close()
    fut = log.sync_future(5)
    assert isinstance(fut.exception(timeout=5), LogClosedError)


WRITER = textwrap.dedent(
    """
    import random, sys
    from seglog.storage import Message, open_log
    log = open_log(sys.argv[1], create=True, segment_bytes=4096)
    rng = random.Random(int(sys.argv[2]))
    while True:
        start = log.next_offset()
        n = rng.randint(1, 5)
        msgs = [Message(key=b"k", value=b"v%d" % (start + i)) for i in range(n)]
        end = log.publish(msgs)
        assert end == start + n
        print(start, end, flush=True)
    """
)


def _check_acked(path: str, acked: list[tuple[int, int]]) -> int:
    with open_log(path) as log:
        end = log.log_end_offset
        got: list[Message] = []
        offset = 0
        while offset < end:
            offset, msgs = log.consume(offset, 1000)
            got.extend(msgs)
        # contiguous, no duplicates, no phantoms: every stored value is the one written
        assert [m.offset for m in got] == list(range(end))
        assert all(m.value == b"v%d" % m.offset for m in got)
        for start, stop in acked:
            assert stop <= end
            assert log.get(start).value == b"v%d" % start
        return end


@pytest.mark.slow  # 20 writer processes killed: ~10 s
def test_kill_9_keeps_every_acknowledged_message(tmp_path):
    path = str(tmp_path / "p")
    rng = random.Random(1234)
    acked: list[tuple[int, int]] = []
    end = 0
    for cycle in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, path, str(cycle)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the writer is up and publishing
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        lines = [ln for ln in (first + rest).splitlines() if ln.endswith(tuple("0123456789"))]
        for ln in lines:
            parts = ln.split()
            if len(parts) == 2:
                acked.append((int(parts[0]), int(parts[1])))
        new_end = _check_acked(path, acked)
        assert new_end >= end
        end = new_end
    assert len(acked) > 20


def test_fsync_error_takes_log_offline_never_retried(tmp_path):
    """A real fsync failure: the segment's fd is pointed at a pipe (fdatasync → EINVAL)."""
    cfg = LogConfig(flush_messages=1 << 40)  # appends alone never fsync: we choose when
    log, fsync_thread = with_sync_thread(lambda: Log.open(tmp_path / "p", cfg, create=True))
    log.append(make_batch(2))
    assert log.sync() == 2
    fsyncs = log.fsync_count
    log.append(make_batch(1))
    seg_fd = log._state.segments[-1].fd  # internals: the fault is injected under the log
    saved = os.dup(seg_fd)
    r, w = os.pipe()
    os.dup2(r, seg_fd)
    try:
        fut = log.sync_future(3)
        assert isinstance(fut.exception(timeout=10), LogClosedError)
        with pytest.raises(LogClosedError):
            log.sync()
        with pytest.raises(LogClosedError):
            log.append(make_batch(1))
        assert isinstance(log.sync_future(1).exception(timeout=1), LogClosedError)
        # the fsync thread stops for good at the error: nothing is left to retry it
        wait_until(lambda: not fsync_thread.is_alive(), timeout=10, message="fsync thread alive")
        assert log.fsync_count == fsyncs  # the failed fsync is never retried
    finally:
        os.dup2(saved, seg_fd)
        for fd in (saved, r, w):
            os.close(fd)
    log.close()
    assert not (tmp_path / "p" / ".clean_shutdown").exists()
    with Log.open(tmp_path / "p") as again:  # recovery on reopen
        assert again.log_end_offset == 3


def test_concurrent_readers_while_appending_and_rolling(tmp_path):
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=200)
    errors: list[BaseException] = []
    done = threading.Event()
    with Log.open(tmp_path / "p", cfg, create=True) as log:

        def writer() -> None:
            try:
                for i in range(150):
                    info = log.append(make_batch(1 + i % 3))
                    if i % 10 == 0:
                        log.sync_future(info.last_offset + 1).result(timeout=30)
            except BaseException as e:
                errors.append(e)
            finally:
                done.set()

        def reader(seed: int) -> None:
            rng = random.Random(seed)
            try:
                while not done.is_set():
                    hw = log.high_watermark
                    if hw == 0:
                        time.sleep(0.001)
                        continue
                    offset = rng.randrange(hw)
                    data = log.read(offset, rng.choice([1, 300, 5000]))
                    assert data, offset
                    pos = 0
                    first = True
                    while pos < len(data):
                        h = check_stored_batch(data, pos)
                        assert h is not None
                        assert h.base_offset < hw
                        if first:
                            assert h.base_offset <= offset <= h.last_offset
                            first = False
                        pos += h.size
            except BaseException as e:
                errors.append(e)

        ts = [threading.Thread(target=writer)] + [
            threading.Thread(target=reader, args=(s,)) for s in range(3)
        ]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        assert log.stat()["segments"] > 5


async def test_cancelled_waiter_does_not_kill_the_fsync_thread(tmp_path):
    with Log.open(tmp_path / "p", create=True) as log:
        waiter = asyncio.wrap_future(log.sync_future(5))
        waiter.cancel()  # a producer disconnecting while waiting for its fsync
        with pytest.raises(asyncio.CancelledError):
            await waiter
        raw = log.sync_future(5)
        assert not raw.cancel()
        log.append(make_batch(5))
        assert await asyncio.wrap_future(log.sync_future(5)) == 5
        assert raw.result(timeout=10) == 5
        log.append(make_batch(1))
        assert log.sync() == 6


def test_acknowledged_append_is_visible_when_its_sync_future_completes(tmp_path):
    """Read-your-writes: the high watermark covers an append before its future completes.

    The callback runs on the fsync thread at the moment the future completes, which is when
    the broker answers the producer; a ListOffsets or Fetch right after must see the data.
    """
    seen: list[tuple[int, int]] = []
    with Log.open(tmp_path / "p", create=True) as log:
        for _ in range(200):
            info = log.append(make_batch(1))
            end = info.last_offset + 1
            done = threading.Event()

            def check(_fut: object, end: int = end, done: threading.Event = done) -> None:
                seen.append((end, log.high_watermark))
                done.set()

            log.sync_future(end).add_done_callback(check)
            assert done.wait(30)
    assert len(seen) == 200
    assert [(end, hwm) for end, hwm in seen if hwm < end] == []


def _round_threads(log: Log) -> list[str]:
    """Names of the threads running each fsync round from now on."""
    names: list[str] = []
    log.set_sync_observer(lambda _took, _n: names.append(threading.current_thread().name))
    return names


def test_lone_publisher_runs_its_fsync_itself(tmp_path):
    """No other writer waiting: publish / sync run the fsync round in the calling thread
    (no hand-off to the fsync thread), and the round still does everything a round does:
    high watermark, on_append callbacks, other waiters, fsync_count."""
    seen: list[int] = []
    with Log.open(tmp_path / "p", create=True) as log:
        names = _round_threads(log)
        log.on_append(seen.append)
        for i in range(20):
            end = log.publish([Message(value=b"v%d" % i)] * 3)
            assert end == 3 * (i + 1)
            assert log.high_watermark == end
            assert seen[-1] == end
        assert log.fsync_count >= 20
        assert set(names) == {threading.current_thread().name}
        log.publish_values([b"a", b"b"])
        log.append(make_batch(2))
        waiter = log.sync_future(log.log_end_offset)
        assert log.sync() == 64
        assert waiter.result(timeout=10) == 64
        assert log.consume(0, 100)[0] == 64


def test_sync_future_never_runs_the_fsync_in_the_caller(tmp_path):
    """The broker calls append and sync_future from its event loop: those rounds always
    run on the fsync thread."""
    with Log.open(tmp_path / "p", create=True) as log:
        names = _round_threads(log)
        for _ in range(10):
            info = log.append(make_batch(2))
            log.sync_future(info.last_offset + 1).result(timeout=10)
        assert names
        assert all(n.startswith("seglog-sync-") for n in names)


def test_concurrent_publishers_share_fsyncs(tmp_path):
    threads, per_thread = 8, 30
    with Log.open(tmp_path / "p", create=True) as log:

        def work() -> None:
            for _ in range(per_thread):
                end = log.publish([Message(value=b"x")] * 2)
                assert log.high_watermark >= end

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert log.append_count == threads * per_thread
        assert 0 < log.fsync_count < threads * per_thread
        assert log.high_watermark == log.log_end_offset == 2 * threads * per_thread
        assert len(log.consume(0, 10_000)[1]) == 2 * threads * per_thread


def test_fsync_error_in_a_publishing_thread_takes_log_offline(tmp_path):
    """The round run by the publisher itself fails: same as on the fsync thread (offline,
    every waiter and later call LogClosedError, never retried)."""
    log, fsync_thread = with_sync_thread(lambda: Log.open(tmp_path / "p", create=True))
    assert log.publish([Message(value=b"a")]) == 1
    fsyncs = log.fsync_count
    seg = log._state.segments[-1]  # internals: its sync is replaced by a failing one
    calls: list[str] = []

    def failing_sync() -> None:
        calls.append(threading.current_thread().name)
        raise OSError(5, "Input/output error")

    seg.sync = failing_sync  # type: ignore[method-assign]
    with pytest.raises(LogClosedError):
        log.publish([Message(value=b"b")])
    assert calls == [threading.current_thread().name]
    assert log.high_watermark == 1
    with pytest.raises(LogClosedError):
        log.sync()
    with pytest.raises(LogClosedError):
        log.publish([Message(value=b"c")])
    assert isinstance(log.sync_future(1).exception(timeout=1), LogClosedError)
    # the fsync thread stops for good at the error: nothing is left to retry it
    wait_until(lambda: not fsync_thread.is_alive(), timeout=10, message="fsync thread alive")
    assert log.fsync_count == fsyncs
    assert len(calls) == 1  # never retried
    log.close()
    assert not (tmp_path / "p" / ".clean_shutdown").exists()
    with Log.open(tmp_path / "p") as again:  # recovery on reopen: "b" was written
        assert again.log_end_offset == 2


def test_interrupted_caller_round_is_no_fsync_error(tmp_path):
    """A KeyboardInterrupt inside the round a publisher runs is raised to it, but the log
    stays online and the fsync thread makes the records durable."""
    with Log.open(tmp_path / "p", create=True) as log:
        seg = log._state.segments[-1]  # internals: its sync is interrupted
        real = seg.sync
        calls: list[str] = []

        def interrupted() -> None:
            calls.append(threading.current_thread().name)
            if len(calls) == 1:
                raise KeyboardInterrupt
            real()

        seg.sync = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            log.publish([Message(value=b"a")] * 2)
        assert log.sync_future(2).result(timeout=10) == 2  # the thread's round
        assert calls[1].startswith("seglog-sync-")
        assert log.high_watermark == 2
        assert log.publish([Message(value=b"b")]) == 3
