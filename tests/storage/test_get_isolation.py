"""Point reads under an isolation level (``get``, ``get_by_key`` / ``offset_by_key``,
``get_by_time`` / ``offset_by_time``): read_committed sees only records below the last
stable offset outside aborted transactions; no level ever returns a control record.
Tests taking ``make_log`` run on disk and in memory; reopen and compaction on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage import (
    STR,
    Log,
    Message,
    TypedLog,
    compact,
    encode_control_batch,
    open_log,
)

from ._batches import make_batch, txn_batch

RC = "read_committed"
MakeLog = Callable[..., Log]


def _end(log: Log, pid: int, *, commit: bool, ts: int = 1) -> int:
    marker = encode_control_batch(pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=ts)
    return log.append(marker, origin="coordinator").base_offset


def _txn(log: Log, pid: int, value: bytes, *, key: bytes = b"k", ts: int | None = None) -> int:
    """One transactional record ``key -> value`` of ``pid``; its offset."""
    batch = txn_batch(pid, 1, key_prefix=key, tag=value + b"|", timestamp=ts)
    return log.append(batch).base_offset


def _value(m: Message) -> bytes:
    assert m.value is not None
    return m.value.split(b"|")[0]


def test_get_read_committed(make_log: MakeLog) -> None:
    with make_log(flush_messages=1) as log:
        log.append(make_batch(2, tag=b"plain"))  # 0-1
        log.append(txn_batch(7, 3, tag=b"abort"))  # 2-4
        log.append(txn_batch(8, 2, tag=b"commit"))  # 5-6
        assert log.last_stable_offset == 2
        assert log.get(0, isolation_level=RC).offset == 0
        for off in (2, 5, 6):  # ongoing: past the LSO
            with pytest.raises(InvalidOffsetError, match="last stable offset"):
                log.get(off, isolation_level=RC)
            assert log.get(off).offset == off  # read_uncommitted sees it
        assert _end(log, 7, commit=False) == 7
        assert _end(log, 8, commit=True) == 8
        assert log.last_stable_offset == 9
        for off in (2, 3, 4):
            with pytest.raises(NotFoundError, match="aborted transaction"):
                log.get(off, isolation_level=RC)
            assert log.get(off).value.startswith(b"abort")  # type: ignore[union-attr]
        assert log.get(5, isolation_level=RC).value.startswith(b"commit")  # type: ignore[union-attr]
        for off in (7, 8):  # the markers: never, at either level
            for level in ("read_uncommitted", RC):
                with pytest.raises(NotFoundError, match="control record"):
                    log.get(off, isolation_level=level)  # type: ignore[arg-type]
        with pytest.raises(InvalidOffsetError):
            log.get(9, isolation_level=RC)
        with pytest.raises(ValueError, match="isolation_level"):
            log.get(0, isolation_level="read_dirty")  # type: ignore[arg-type]


def test_get_by_key_committed_then_aborted(tmp_path: Path) -> None:
    d = tmp_path / "p"
    with open_log(d, create=True, key_index=True, segment_messages=2) as log:
        v1 = _txn(log, 1, b"v1")  # 0
        _end(log, 1, commit=True)  # 1
        _txn(log, 2, b"v2")  # 2: aborted below, read_committed skips it too...
        v2 = _txn(log, 2, b"v2")  # 3: ...when it scans back from here
        _end(log, 2, commit=False)  # 4
        for i in range(3):  # 5-7: roll past the transactions (compaction below)
            log.publish([Message(key=b"other%d" % i, value=b"x")])
        log.sync()

        def check(uncommitted: int) -> None:
            assert _value(log.get_by_key(b"k0", isolation_level=RC)) == b"v1"
            assert log.offset_by_key(b"k0", isolation_level=RC) == v1
            assert log.offset_by_key(b"k0") == uncommitted
            assert log.get_by_key(b"k0").offset == uncommitted

        check(v2)  # read_uncommitted: the latest record stored, aborted or not
        with pytest.raises(ValueError, match="isolation_level"):
            log.offset_by_key(b"k0", isolation_level="committed")  # type: ignore[arg-type]
    with open_log(d, key_index=True, segment_messages=2) as log:  # key index reloaded
        check(v2)
        res = compact(log, now_ms=10**13)
        assert v2 in res.offsets  # the cleaner removes the aborted record...
        check(v1)  # ...then both levels answer v1
    with open_log(d, key_index=True, segment_messages=2) as log:
        check(v1)


def test_get_by_key_with_an_ongoing_transaction(make_log: MakeLog) -> None:
    with make_log(key_index=True, flush_messages=1) as log:
        log.publish([Message(key=b"k0", value=b"v1")])  # 0
        v2 = _txn(log, 5, b"v2")  # 1: ongoing
        assert log.get_by_key(b"k0", isolation_level=RC).value == b"v1"
        assert log.get_by_key(b"k0").offset == v2
        log.publish([Message(key=b"k0", value=b"v3")])  # 2: past the LSO (1)
        assert log.get_by_key(b"k0", isolation_level=RC).value == b"v1"
        _end(log, 5, commit=True)
        assert log.get_by_key(b"k0", isolation_level=RC).value == b"v3"
        assert log.offset_by_key(b"k0", isolation_level=RC) == 2


def test_key_only_in_aborted_or_ongoing_transactions(make_log: MakeLog) -> None:
    with make_log(key_index=True, flush_messages=1) as log:
        log.publish([Message(key=b"other", value=b"x")])  # 0
        aborted = _txn(log, 1, b"gone", key=b"a")
        _end(log, 1, commit=False)
        ongoing = _txn(log, 2, b"open", key=b"o")
        for key in (b"a0", b"o0"):
            with pytest.raises(NotFoundError, match="committed"):
                log.get_by_key(key, isolation_level=RC)
            with pytest.raises(NotFoundError):
                log.offset_by_key(key, isolation_level=RC)
        assert log.offset_by_key(b"a0") == aborted
        assert log.offset_by_key(b"o0") == ongoing
        with pytest.raises(NotFoundError):
            log.get_by_key(b"never", isolation_level=RC)


def test_get_by_key_scans_back_over_many_windows(make_log: MakeLog) -> None:
    """The committed record lies thousands of offsets behind the aborted last one: the
    backward scan walks several doubling windows, aborted records of the key between."""
    with make_log(key_index=True, flush_messages=1) as log:
        log.publish([Message(key=b"x", value=b"first")])  # 0
        log.publish_values([b"v"] * 2500, keys=[b"y%d" % i for i in range(2500)])
        log.append(txn_batch(3, 1, key_prefix=b"x", tag=b"aborted|"))  # key b"x0"
        log.publish([Message(key=b"x0", value=b"committed")])
        log.publish_values([b"v"] * 3000, keys=[b"z%d" % i for i in range(3000)])
        last = _txn(log, 3, b"aborted", key=b"x")
        _end(log, 3, commit=False)
        log.publish_values([b"v"] * 10)
        found = log.get_by_key(b"x0", isolation_level=RC)
        assert found.value == b"committed"
        assert found.offset == 2502
        assert log.offset_by_key(b"x0") == last
        assert log.get_by_key(b"x", isolation_level=RC).offset == 0


def test_get_by_time_skips_aborted_records_and_markers(make_log: MakeLog) -> None:
    with make_log(flush_messages=1) as log:
        log.publish([Message(key=b"a", value=b"plain", timestamp=1000)])  # 0
        log.append(txn_batch(1, 2, tag=b"aborted", timestamp=2000))  # 1-2
        _end(log, 1, commit=False, ts=2500)  # 3
        log.append(txn_batch(2, 1, tag=b"committed", timestamp=3000))  # 4
        _end(log, 2, commit=True, ts=3000)  # 5
        log.append(txn_batch(3, 1, tag=b"open", timestamp=4000))  # 6: ongoing
        assert log.offset_by_time(1500) == (1, 2000)
        assert log.offset_by_time(1500, isolation_level=RC) == (4, 3000)
        assert log.get_by_time(1500, isolation_level=RC).offset == 4
        assert log.get_by_time(1500).offset == 1
        assert log.offset_by_time(2400) == (4, 3000)  # the marker at 2500 is not a record
        assert log.offset_by_time(500, isolation_level=RC) == (0, 1000)
        assert log.offset_by_time(3500) == (6, 4000)
        with pytest.raises(NotFoundError):
            log.offset_by_time(3500, isolation_level=RC)  # only the ongoing one
        with pytest.raises(NotFoundError):
            log.get_by_time(3500, isolation_level=RC)
        assert log.offset_for_time(3500, isolation_level=RC) is None
        _end(log, 3, commit=True, ts=4000)
        assert log.offset_by_time(3500, isolation_level=RC) == (6, 4000)
        with pytest.raises(ValueError, match="isolation_level"):
            log.offset_by_time(0, isolation_level="x")  # type: ignore[arg-type]


def test_get_by_time_scans_past_a_long_aborted_transaction(make_log: MakeLog) -> None:
    with make_log(flush_messages=1, segment_bytes=4096) as log:
        for _ in range(30):  # 60 aborted records over several segments
            log.append(txn_batch(1, 2, timestamp=2000))
        _end(log, 1, commit=False, ts=2000)
        log.publish([Message(key=b"a", value=b"after", timestamp=1500)])  # too early
        log.publish([Message(key=b"b", value=b"hit", timestamp=2100)])
        assert log.get_by_time(1800, isolation_level=RC).value == b"hit"
        assert log.offset_by_time(1800) == (0, 2000)


def test_typed_log_point_reads_take_the_level(make_log: MakeLog) -> None:
    with TypedLog(make_log(key_index=True), STR, STR) as typed:
        typed.log.publish([Message(key=b"k0", value=b"v1", timestamp=1000)])
        _txn(typed.log, 4, b"v2", ts=2000)
        assert typed.get_by_key("k0", isolation_level=RC).value == "v1"
        assert typed.offset_by_key("k0", isolation_level=RC) == 0
        assert typed.get(0, isolation_level=RC).value == "v1"
        with pytest.raises(NotFoundError):
            typed.get_by_time(1500, isolation_level=RC)
        assert typed.offset_by_time(1500) == (1, 2000)
        assert typed.get_by_time(1500).offset == 1
