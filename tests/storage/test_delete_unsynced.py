"""``delete_offsets`` on a log under the relaxed flush (flush.ms / flush.messages): the
segments rolled by appends but not yet fsynced by the group commit are made durable
first, then rewritten like any closed segment, never skipped (disk only: a memory log
waits for that round after each roll)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.storage._cleaner import all_messages

import seglog
from seglog.errors import NotFoundError
from seglog.storage import Message, check, delete_offsets
from seglog.storage.config import FLUSH_NEVER
from seglog.storage.log.sync import SyncPoint

RELAXED = [
    pytest.param({"flush_ms": 60_000}, id="flush_ms"),
    pytest.param({"flush_messages": 1000}, id="flush_messages"),
    pytest.param({"flush_messages": FLUSH_NEVER}, id="flush_never"),
]


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``held(log)``: the log's fsync rounds wait until a caller asks for a whole round
    (``GroupCommit.flush``), so the segments the appends roll stay unsynced until then
    (deterministic: otherwise the background round races the test)."""
    gates: list[threading.Event] = []

    def hold(log: seglog.Log) -> None:
        gc = log._state.group_commit  # internals: the test holds the fsync rounds back
        assert gc is not None
        gate = threading.Event()
        gates.append(gate)
        point, flush = gc._point, gc.flush

        def held_point() -> SyncPoint:
            assert gate.wait(timeout=60), "no flush round was asked for"
            return point()

        def opening_flush() -> Any:
            gate.set()
            return flush()

        monkeypatch.setattr(gc, "_point", held_point)
        monkeypatch.setattr(gc, "flush", opening_flush)

    yield hold
    for gate in gates:
        gate.set()


def _publish(log: seglog.Log, n: int) -> None:
    for i in range(n):
        log.publish([Message(key=b"k%d" % (i % 3), value=b"v%d" % i, timestamp=1_000 + i)])


@pytest.mark.parametrize("config", RELAXED)
def test_delete_in_rolled_unsynced_segments(
    tmp_path: Path, held: Any, config: dict[str, int]
) -> None:
    path = tmp_path / "t-0"
    log = seglog.open_log(path, create=True, segment_bytes=200, **config)
    held(log)
    _publish(log, 10)
    # internals: which rolled segments the group commit has not fsynced yet
    unsynced = {s.base_offset for s in log._state.rolled_unsynced}
    assert unsynced  # what the audit found skipped: offsets in these segments
    before = all_messages(log)
    res = delete_offsets(log, [1, 2, 6])
    assert res.offsets == [1, 2, 6]
    assert res.bytes_freed > 0
    assert not log._state.rolled_unsynced
    for o in (1, 2, 6):
        with pytest.raises(NotFoundError):
            log.get(o)
    assert all_messages(log) == [m for m in before if m.offset not in {1, 2, 6}]
    assert (log.log_start_offset, log.log_end_offset) == (0, 10)
    log.close()
    with seglog.open_log(path) as log:
        assert [m.offset for m in all_messages(log)] == [0, 3, 4, 5, 7, 8, 9]
    assert all(r.ok for r in check(path))


@pytest.mark.parametrize("config", RELAXED)
def test_delete_in_the_active_segment_under_relaxed_flush(
    tmp_path: Path, held: Any, config: dict[str, int]
) -> None:
    """Every segment holds a wanted offset: the rolled ones, and the active one (rolled
    by the delete)."""
    path = tmp_path / "t-0"
    log = seglog.open_log(path, create=True, segment_bytes=200, **config)
    held(log)
    _publish(log, 9)
    wanted = list(range(0, 9, 2))
    assert log.segments()[-1].base_offset <= wanted[-1]
    assert delete_offsets(log, wanted).offsets == wanted
    assert [m.offset for m in all_messages(log)] == [1, 3, 5, 7]
    log.close()
    assert all(r.ok for r in check(path))
