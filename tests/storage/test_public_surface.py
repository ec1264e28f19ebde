"""A Log's internal state is private to ``seglog.storage.log``: everything else (retention,
the tools, the broker, the console, the CLI...) uses the public members of ``Log`` (the
contract in ``seglog.storage.api``). Checked as ``tests/test_quality.py`` checks imports:
by reading the source."""

from __future__ import annotations

import ast
import itertools
import pathlib
import re

import pytest

import seglog
from seglog.errors import LogClosedError
from seglog.storage import Log, Message, SegmentInfo, open_log

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
LOG_PACKAGE = SRC / "seglog" / "storage" / "log"

_LOG_RECEIVER = re.compile(r"(?i)log(\(.*\))?$")
"""A receiver that names a log: ``log``, ``plog``, ``self._log``, ``dd.log("t", 0)``..."""


def _state_reads(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each read of a log's state in ``source``: ``X._state`` for
    any ``X`` but ``self``/``cls`` (a class's own ``_state`` field is its business),
    ``X.state`` where ``X`` names a log (``ctx.state``, ``group.state`` are other
    objects), and ``getattr(X, "_state")``/``getattr(X, "state")`` likewise."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        receiver: ast.expr | None = None
        attr = ""
        if isinstance(node, ast.Attribute):
            receiver, attr = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            receiver, attr = node.args[0], node.args[1].value
        if receiver is None:
            continue
        text = ast.unparse(receiver)
        if (attr == "_state" and text not in ("self", "cls")) or (
            attr == "state" and _LOG_RECEIVER.search(text)
        ):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    """The detector below is what the real check runs: it must see each form."""
    source = (
        "a = log.state.segments\n"
        "b = plog._state\n"
        "c = self._log._state.lock\n"
        'd = dd.log("t", 0).state\n'
        'e = getattr(log, "_state")\n'
        "f = ctx.state.cluster_id\n"  # the broker's state: not a log's
        "g = group.state\n"
        "h = self._state\n"  # a class's own field (e.g. the offset index's)
    )
    assert sorted(line for line, _ in _state_reads(source)) == [1, 2, 3, 4, 5]


def test_nothing_outside_storage_log_reads_a_logs_state() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line}: {expr}"
        for path in sorted(SRC.rglob("*.py"))
        if LOG_PACKAGE not in path.parents
        for line, expr in _state_reads(path.read_text())
    ]
    assert offenders == []


def test_log_has_no_public_state(tmp_path: pathlib.Path) -> None:
    """``state`` is gone from ``Log``'s class and instances: a caller typed with ``Log``
    reaching for it fails mypy, and at run time AttributeError."""
    assert not hasattr(Log, "state")
    with open_log(tmp_path / "p", create=True) as log:
        assert not hasattr(log, "state")
    assert "state" not in dir(seglog.storage.LogAPI)


def test_segments_lists_each_segment_from_memory(tmp_path: pathlib.Path) -> None:
    """``Log.segments()``: the summaries retention and tests use instead of the state."""
    path = tmp_path / "p"
    with open_log(path, create=True, segment_bytes=300) as log:
        for i in range(20):
            log.publish([Message(value=b"v%02d" % i, timestamp=1_000 + i)])
        segs = log.segments()
        assert all(isinstance(s, SegmentInfo) for s in segs)
        assert len(segs) > 3
        assert [s.base_offset for s in segs] == sorted(int(p.name[:20]) for p in path.glob("*.log"))
        for seg, after in itertools.pairwise(segs):
            assert seg.next_offset == after.base_offset  # no gaps: nothing compacted
        assert segs[-1].next_offset == log.log_end_offset == 20
        assert sum(s.size for s in segs) == log.stat()["bytes"]
        for s in segs:
            assert s.size == (path / f"{s.base_offset:020d}.log").stat().st_size
        stats = log.stats().segments
        assert [s.max_timestamp_ms for s in segs] == [s.max_timestamp_ms for s in stats]
        assert [s.fd_open for s in segs] == [s.fd_open for s in stats]
        log.publish([Message(value=b"late", timestamp=5_000)])
        now = log.segments()
        assert (now[-1].next_offset, now[-1].max_timestamp_ms) == (21, 5_000)
        assert segs[-1].next_offset == 20  # a snapshot, not a live view
    with pytest.raises(LogClosedError):
        log.segments()
