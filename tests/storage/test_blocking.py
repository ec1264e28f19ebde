"""Blocking consume (``Log.consume_blocking``): woken by the writer, timeouts, cancellation,
close, many concurrent tailers (the asyncio twins: ``tests/aio/test_tail.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError

import pytest
from tests._logs import when_waiting

from seglog import OFFSET_NEWEST, OFFSET_OLDEST, Log, Message
from seglog.errors import LogClosedError
from seglog.storage import CancelToken

MakeLog = Callable[..., Log]


def test_sync_woken_by_writer_and_timeout(make_log: MakeLog) -> None:
    with make_log() as log:
        t0 = time.monotonic()
        assert log.consume_blocking(OFFSET_OLDEST, 10, 0.05) == (0, [])
        assert time.monotonic() - t0 >= 0.04
        t = when_waiting(log, lambda: log.publish([Message(value=b"a")]))
        nxt, got = log.consume_blocking(OFFSET_NEWEST, 10, 30)
        t.join()
        assert (nxt, [m.value for m in got]) == (1, [b"a"])
        assert log.waiting_readers == 0  # no waiter left behind


def test_sync_cancel_and_close(make_log: MakeLog) -> None:
    with make_log() as log:
        token = CancelToken()
        t = when_waiting(log, token.cancel)
        with pytest.raises(CancelledError):
            log.consume_blocking(0, 10, 30, cancel=token)
        t.join()
        with pytest.raises(CancelledError):  # a cancelled token stays cancelled
            log.consume_blocking(0, 10, 30, cancel=token)
        t = when_waiting(log, log.close)
        with pytest.raises(LogClosedError):
            log.consume_blocking(0, 10, 30)
        t.join()


def test_fifty_thread_tailers(make_log: MakeLog) -> None:
    n_tailers, n_msgs = 50, 30
    got: dict[int, list[bytes | None]] = {}
    with make_log() as log:

        def tail(i: int) -> None:
            offset, seen = 0, list[bytes | None]()
            while len(seen) < n_msgs:
                offset, msgs = log.consume_blocking(offset, 7, 30)
                seen += [m.value for m in msgs]
            got[i] = seen

        threads = [threading.Thread(target=tail, args=(i,)) for i in range(n_tailers)]
        for t in threads:
            t.start()
        for j in range(n_msgs):
            log.publish([Message(value=b"%d" % j)])
        for t in threads:
            t.join(60)
        assert len(got) == n_tailers
        assert all(v == [b"%d" % j for j in range(n_msgs)] for v in got.values())
        assert log.waiting_readers == 0
