"""The ``backend`` and ``make_log`` fixtures, shared by the storage and aio tests (their
conftests import them).

``make_log(**config)`` opens a new, empty log with ``open_log``'s settings on each backend
the embedded API promises the same semantics on: ``disk`` (``open_log(tmp_path / ...,
create=True)``) and ``memory`` (``memory_log``, a private tmpfs directory). Tests taking it
run twice.
"""

from __future__ import annotations

import itertools
import pathlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests._wait import wait_until

import seglog.storage  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)
from seglog.storage import Log, NoMemoryFilesystemError, memory_log, open_log
from seglog.storage.log.memory import default_ram_dir

__all__ = ["BACKENDS", "backend", "make_log", "no_ram_filesystem", "when_waiting"]

BACKENDS = ("disk", "memory")


def no_ram_filesystem() -> str | None:
    """Why memory logs cannot run here (no tmpfs or ramfs), or None."""
    try:
        default_ram_dir()
    except NoMemoryFilesystemError as e:
        return str(e)
    return None


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The log backend a ``make_log`` test runs on (``disk`` or ``memory``; memory is
    skipped where there is no tmpfs)."""
    if request.param == "memory" and (why := no_ram_filesystem()) is not None:
        pytest.skip(why)
    return str(request.param)


@pytest.fixture
def make_log(backend: str, tmp_path: pathlib.Path) -> Iterator[Callable[..., Log]]:
    """``make_log(**config)``: a new empty writable log (config as ``open_log``'s keywords)
    on ``backend``; every log made is closed at teardown, and a memory log must leave
    nothing behind."""
    made: list[Log] = []
    names = itertools.count()

    def make(**config: Any) -> Log:
        if backend == "disk":
            log = open_log(tmp_path / f"log{next(names)}", create=True, **config)
        else:
            log = memory_log(**config)
        made.append(log)
        return log

    yield make
    for log in made:
        log.close()
        if backend == "memory":
            assert not log.directory.exists()


def when_waiting(log: Log, fn: Callable[[], object], waiters: int = 1) -> threading.Thread:
    """Run ``fn`` in a thread once ``waiters`` readers are parked on ``log``
    (``Log.waiting_readers``): the wake-up is then what the test exercises, not a race."""

    def run() -> None:
        wait_until(
            lambda: log.waiting_readers >= waiters,
            interval=0.001,
            message="no reader started waiting",
        )
        fn()

    t = threading.Thread(target=run)
    t.start()
    return t
