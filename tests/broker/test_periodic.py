"""``PeriodicThread``: the loop the retention, tiering and Iceberg threads share — passes
on schedule, a failing pass logged and the next one run, ``stop`` idempotent."""

from __future__ import annotations

import logging
import threading

import pytest
from tests._wait import wait_until

from seglog.broker.log.periodic import PeriodicThread


def test_passes_run_until_stopped_and_a_failing_pass_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def body() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")

    thread = PeriodicThread("seglog-test-periodic", 0.01, body, what="test")
    with caplog.at_level(logging.ERROR, logger="seglog.broker.log.periodic"):
        thread.start()
        assert any(t.name == "seglog-test-periodic" and t.daemon for t in threading.enumerate())
        wait_until(lambda: len(calls) >= 4, timeout=30)
        thread.stop()
        thread.stop()
    assert thread.stopping
    assert "test pass failed" in caplog.text
    assert "boom" in caplog.text
    done = len(calls)
    assert not any(t.name == "seglog-test-periodic" for t in threading.enumerate())
    assert len(calls) == done


def test_stop_before_the_first_pass_runs_none() -> None:
    calls: list[int] = []
    thread = PeriodicThread("seglog-test-periodic2", 60.0, lambda: calls.append(1), what="t")
    thread.start()
    thread.stop()
    assert calls == []
