"""Consume's remembered read position (``LogState.read_hint``) and the fast Message
constructor: a consume continuing where the last one stopped must read what a fresh
lookup reads, also after roll, retention, compaction, delete, and reopen (recovery).
Tests taking ``make_log`` run on disk and in memory; the reopen is disk-only."""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.storage._cleaner import all_messages, keyed_log

import seglog
from seglog.errors import InvalidOffsetError
from seglog.storage import (
    OFFSET_OLDEST,
    Log,
    Message,
    compact,
    delete_offsets,
    trim_by_count,
    trim_by_offset,
)
from seglog.storage.record.message import GC_PAUSE_MIN, new_message, new_messages

MakeLog = Callable[..., Log]


def _fresh(log: Log, offset: int, count: int) -> list[Message]:
    log._state.read_hint = None  # a cold lookup through the offset index (internals)
    return log.consume(offset, count)[1]


def _walk(log: Log, per_call: int) -> list[Message]:
    """Every visible message, ``per_call`` at a time, checking each call against a cold
    lookup of the same offset."""
    out: list[Message] = []
    offset = OFFSET_OLDEST
    while True:
        nxt, msgs = log.consume(offset, per_call)
        saved = log._state.read_hint  # internals: the hint is what this file tests
        assert msgs == _fresh(log, offset, per_call)
        log._state.read_hint = saved
        if not msgs:
            return out
        out.extend(msgs)
        offset = nxt


def test_new_message_is_a_message() -> None:
    m = new_message(7, 1_000, b"k", None, (("h", b"v"),))
    ref = Message(offset=7, timestamp=1_000, key=b"k", value=None, headers=(("h", b"v"),))
    assert type(m) is Message
    assert m == ref
    assert hash(m) == hash(ref)
    assert repr(m) == repr(ref)
    assert pickle.loads(pickle.dumps(m)) == ref
    assert dataclasses.astuple(m) == dataclasses.astuple(ref)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.offset = 8  # type: ignore[misc]


def test_message_behaves_as_the_frozen_dataclass() -> None:
    """Message is stored as a tuple (fast to build) but keeps the dataclass's contract."""
    m = Message(offset=7, timestamp=1_000, key=b"k", value=None, headers=(("h", b"v"),))
    row = (7, 1_000, b"k", None, (("h", b"v"),))
    assert repr(m) == (
        "Message(offset=7, timestamp=1000, key=b'k', value=None, headers=(('h', b'v'),))"
    )
    assert Message() == Message(-1, -1, None, None, ())
    assert m == Message(*row)
    assert m != row
    assert row != m
    assert not m == row  # noqa: SIM201 (__eq__ itself, not __ne__)
    assert m != Message(*row[:4], ())
    assert hash(m) == hash(row)  # the dataclass's hash((offset, ..., headers))
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(m, proto))
        assert again == m
        assert type(again) is Message
    assert copy.copy(m) == m
    assert copy.deepcopy(m) == m
    assert dataclasses.is_dataclass(m)
    assert [f.name for f in dataclasses.fields(Message)] == [
        "offset", "timestamp", "key", "value", "headers"
    ]  # fmt: skip
    assert dataclasses.astuple(m) == row
    assert dataclasses.asdict(m)["key"] == b"k"
    assert dataclasses.replace(m, offset=8) == Message(8, *row[1:])
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.key = b"x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del m.value  # type: ignore[misc]
    with pytest.raises(TypeError):
        _ = m < m  # type: ignore[operator]
    match m:
        case Message(offset=o, key=k):
            assert (o, k) == (7, b"k")


def test_new_messages_columns() -> None:
    cols = ([1, 2], [10, 20], [b"a", None], [None, b"b"], [(), (("h", None),)])
    got = new_messages(*cols)
    assert got == [Message(*row) for row in zip(*cols, strict=True)]
    assert all(type(m) is Message for m in got)
    assert new_messages([], [], [], [], []) == []
    with pytest.raises(ValueError, match="column"):
        new_messages([1, 2], [10], [None, None], [None, None], [(), ()])


def test_new_messages_pauses_the_garbage_collector() -> None:
    n = 20 * GC_PAUSE_MIN
    cols = (list(range(n)), [0] * n, [b"k"] * n, [b"v"] * n, [()] * n)
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        # only collections started while new_messages builds (one due right after it
        # re-enables the collector is not the pause failing)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "new_messages":
            frame = frame.f_back
        if phase == "start" and frame is not None:
            collections.append(info["generation"])

    gc.collect()  # young counts at zero: no collection due before new_messages pauses it
    gc.callbacks.append(seen)
    try:
        got = new_messages(*cols)
        assert len(got) == n
        # 5 k tracked tuples would start ~7 young collections without the pause
        assert collections == []
        assert gc.isenabled()  # resumed
        gc.disable()  # a caller that turned it off keeps it off
        try:
            assert len(new_messages(*cols)) == n
            assert not gc.isenabled()
        finally:
            gc.enable()
        with pytest.raises(ValueError, match="column"):  # resumed after an error too
            new_messages(*cols[:4], [()] * (n - 1))
        assert gc.isenabled()
        assert len(new_messages(*(c[:10] for c in cols))) == 10  # few: no pause needed
    finally:
        gc.callbacks.remove(seen)


@pytest.mark.parametrize("per_call", [1, 3, 7, 50])
def test_sequential_consume_across_segments(make_log: MakeLog, per_call: int) -> None:
    log = keyed_log(make_log, n=90)
    try:
        got = _walk(log, per_call)
        assert [m.offset for m in got] == list(range(90))
        assert got == all_messages(log)
    finally:
        log.close()


def test_hint_survives_roll_and_appends(make_log: MakeLog) -> None:
    with make_log(segment_bytes=512) as log:
        offset, seen = OFFSET_OLDEST, []
        for round_ in range(12):
            log.publish_values([b"x%03d" % (round_ * 10 + i) for i in range(10)])
            cols = log.consume_columns(offset, 4)
            seen += cols.values()
            offset = cols.next_offset
        while len(cols := log.consume_columns(offset, 4)):
            seen += cols.values()
            offset = cols.next_offset
        assert seen == [b"x%03d" % i for i in range(120)]
        assert len(log.segments()) > 2


def test_hint_after_retention_compaction_delete(make_log: MakeLog) -> None:
    log = keyed_log(make_log, n=120)
    try:
        nxt, _ = log.consume(OFFSET_OLDEST, 37)  # remembers a position inside segment 1..
        trim_by_offset(log, 40)
        with pytest.raises(InvalidOffsetError):
            log.consume(nxt, 10)
        nxt, first = log.consume(OFFSET_OLDEST, 5)
        assert [m.offset for m in first] == [40, 41, 42, 43, 44]
        compact(log, deletes=False)
        assert _walk(log, 4) == all_messages(log)
        log.consume(OFFSET_OLDEST, 3)
        survivors = [m.offset for m in all_messages(log)]
        delete_offsets(log, survivors[1:6])
        assert _walk(log, 2) == all_messages(log)
        trim_by_count(log, 5)
        assert _walk(log, 1) == all_messages(log)
        assert len(all_messages(log)) == 5
    finally:
        log.close()


def test_hint_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "p"
    log = keyed_log(path, n=60)
    nxt, _ = log.consume(OFFSET_OLDEST, 25)
    log.close()
    with seglog.open_log(path) as log2:
        assert log2._state.read_hint is None
        _, msgs = log2.consume(nxt, 5)
        assert [m.offset for m in msgs] == [25, 26, 27, 28, 29]
        assert _walk(log2, 6) == all_messages(log2)
