"""Model test: LSO, ongoing and aborted transactions, and read_committed / read_uncommitted
consume of a log against a simple model, across rolls, clean reopens and crash reopens."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage import OFFSET_OLDEST, Log, Message, compact, encode_control_batch, open_log

from ._batches import make_batch, txn_batch

PIDS = (1, 2, 3)

op = st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 3)),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.integers(1, 3)),
    st.tuples(st.just("commit"), st.sampled_from(PIDS)),
    st.tuples(st.just("abort"), st.sampled_from(PIDS)),
    st.tuples(st.just("reopen"), st.booleans()),
)


@dataclass
class Model:
    """Records by offset (``(pid or None, transaction number)``), markers, transactions."""

    end: int = 0
    records: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    ongoing: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (first, txn)
    aborted: set[int] = field(default_factory=set)  # transaction numbers
    aborted_ranges: list[tuple[int, int]] = field(default_factory=list)
    txns: int = 0

    def lso(self) -> int:
        return min([f for f, _ in self.ongoing.values()], default=self.end)

    def committed(self) -> list[int]:
        lso = self.lso()
        return [
            o
            for o, (pid, txn) in sorted(self.records.items())
            if o < lso and (pid is None or txn not in self.aborted)
        ]


def _apply(log: Log, model: Model, step: tuple) -> Log:  # type: ignore[type-arg]
    kind = step[0]
    if kind == "plain":
        for i in range(step[1]):
            model.records[model.end + i] = (None, 0)
        log.append(make_batch(step[1]))
        model.end += step[1]
    elif kind == "txn":
        pid, n = step[1], step[2]
        if pid not in model.ongoing:
            model.txns += 1
            model.ongoing[pid] = (model.end, model.txns)
        txn = model.ongoing[pid][1]
        for i in range(n):
            model.records[model.end + i] = (pid, txn)
        log.append(txn_batch(pid, n))
        model.end += n
    elif kind in ("commit", "abort"):
        pid = step[1]
        commit = kind == "commit"
        marker = encode_control_batch(pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=1)
        log.append(marker, origin="coordinator")
        first, txn = model.ongoing.pop(pid, (model.end, -1))
        if not commit:
            model.aborted.add(txn)
            model.aborted_ranges.append((pid, first))
        model.end += 1
    else:
        directory = log.directory
        if step[1]:
            log.close()
        else:  # a crash: no snapshot at close, no clean-shutdown marker
            log.sync()
            st_ = log._state
            assert st_.group_commit is not None
            st_.group_commit.close()
            for seg in st_.segments:
                seg.close()
            assert st_.lock_fd is not None
            os.close(st_.lock_fd)
        log = open_log(directory, flush_messages=1, segment_bytes=600, key_index=True)
    return log


def _check_point_reads(log: Log, model: Model) -> None:
    """``get`` of every offset and ``get_by_key`` of every key at both levels against the
    model (keys: the last record per key of the model's committed / stored records)."""
    lso, committed = model.lso(), set(model.committed())
    for off in range(model.end):
        if off >= lso:
            with pytest.raises(InvalidOffsetError):
                log.get(off, isolation_level="read_committed")
        elif off in committed:
            assert log.get(off, isolation_level="read_committed").offset == off
        else:  # aborted or a marker
            with pytest.raises(NotFoundError):
                log.get(off, isolation_level="read_committed")
        if off in model.records:
            assert log.get(off).offset == off
        else:
            with pytest.raises(NotFoundError, match="control record"):
                log.get(off)
    _, stored = log.consume(OFFSET_OLDEST, 10_000)
    last_stored = {m.key: m.offset for m in stored}
    last_committed = {m.key: m.offset for m in stored if m.offset in committed}
    for key, off in last_stored.items():
        assert key is not None
        assert log.offset_by_key(key) == off
        if key in last_committed:
            got = log.get_by_key(key, isolation_level="read_committed")
            assert got.offset == last_committed[key]
        else:
            with pytest.raises(NotFoundError):
                log.offset_by_key(key, isolation_level="read_committed")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=30))
def test_transactions_match_the_model(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(
            os.path.join(tmp, "p"),
            create=True,
            flush_messages=1,
            segment_bytes=600,
            key_index=True,
        )
        model = Model()
        try:
            for step in steps:
                log = _apply(log, model, step)
                assert log.log_end_offset == model.end
                assert log.last_stable_offset == model.lso()
                assert log.ongoing_transactions() == {p: f for p, (f, _) in model.ongoing.items()}
                assert sorted(log.aborted_transactions(0, model.end)) == sorted(
                    model.aborted_ranges
                )
            nxt, msgs = log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")
            assert [m.offset for m in msgs] == model.committed()
            assert nxt == model.lso()
            nxt, msgs = log.consume(OFFSET_OLDEST, 10_000)
            assert [m.offset for m in msgs] == sorted(model.records)
            assert nxt == model.end
            # small reads, resumed at the next offset, give the same records
            got, offset = [], OFFSET_OLDEST
            while True:
                offset, part = log.consume(offset, 2, isolation_level="read_committed")
                if not part:
                    break
                got += [m.offset for m in part]
            assert got == model.committed()
            cols = log.consume_columns(OFFSET_OLDEST, 10_000, isolation_level="read_committed")
            assert cols.offsets.tolist() == model.committed()
            _check_point_reads(log, model)
        finally:
            log.close()


cop = st.one_of(
    st.tuples(st.just("plain"), st.sampled_from([b"a", b"b", b"c"])),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.sampled_from([b"a", b"b", b"c"])),
    st.tuples(st.just("commit"), st.sampled_from(PIDS)),
    st.tuples(st.just("abort"), st.sampled_from(PIDS)),
)


def _last_committed(log: Log) -> dict[bytes | None, tuple[int, bytes | None]]:
    _, msgs = log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")
    return {m.key: (m.offset, m.value) for m in msgs}


def _by_key(log: Log) -> dict[bytes, tuple[int | None, int | None]]:
    """``key -> (read_committed offset_by_key, read_uncommitted offset_by_key)``, None for
    NotFoundError, for the keys the compaction model writes."""
    out: dict[bytes, tuple[int | None, int | None]] = {}
    for key in (b"a0", b"b0", b"c0"):
        got: list[int | None] = []
        for level in ("read_committed", "read_uncommitted"):
            try:
                got.append(log.offset_by_key(key, isolation_level=level))  # type: ignore[arg-type]
            except NotFoundError:
                got.append(None)
        out[key] = (got[0], got[1])
    return out


def _expected_by_key(log: Log) -> dict[bytes, tuple[int | None, int | None]]:
    """What ``_by_key`` must answer, from full consumes at both levels."""
    rc = {
        m.key: m.offset
        for m in log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")[1]
    }
    ru = {m.key: m.offset for m in log.consume(OFFSET_OLDEST, 10_000)[1]}
    return {k: (rc.get(k), ru.get(k)) for k in (b"a0", b"b0", b"c0")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(cop, min_size=1, max_size=40), st.booleans())
def test_compaction_keeps_what_read_committed_sees(steps: list[tuple], horizon: bool) -> None:  # type: ignore[type-arg]
    """Compaction (markers removed or not) never changes a key's last committed record,
    never makes an aborted record visible, and leaves no aborted record in what it
    cleaned: read_committed after it is a subset of before with the same last values."""
    with tempfile.TemporaryDirectory() as tmp:
        with open_log(
            os.path.join(tmp, "p"), create=True, segment_messages=3, key_index=True
        ) as log:
            for step in steps:
                if step[0] == "plain":
                    log.publish([Message(key=step[1] + b"0", value=b"plain", timestamp=1)])
                elif step[0] == "txn":
                    log.append(txn_batch(step[1], 1, key_prefix=step[2]))
                else:
                    marker = encode_control_batch(
                        step[1], 0, commit=step[0] == "commit", coordinator_epoch=0, timestamp_ms=1
                    )
                    log.append(marker, origin="coordinator")
            log.sync()
            assert _by_key(log) == _expected_by_key(log)
            before_last = _last_committed(log)
            _, before = log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")
            lso = log.last_stable_offset
            ongoing = log.ongoing_transactions()
            compact(log, now_ms=10**13, delete_retention_ms=0 if horizon else 10**14)
            assert _last_committed(log) == before_last
            assert _by_key(log) == _expected_by_key(log)
            _, after = log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")
            assert {m.offset for m in after} <= {m.offset for m in before}
            assert log.last_stable_offset == lso
            assert log.ongoing_transactions() == ongoing
            # compact again, then reopen: the same records
            compact(log, now_ms=10**13, delete_retention_ms=0 if horizon else 10**14)
            again = [
                m.offset
                for m in log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")[1]
            ]
            directory = log.directory
        with open_log(directory, key_index=True) as log:
            assert _by_key(log) == _expected_by_key(log)
            assert [
                m.offset
                for m in log.consume(OFFSET_OLDEST, 10_000, isolation_level="read_committed")[1]
            ] == again
            assert log.ongoing_transactions() == ongoing
