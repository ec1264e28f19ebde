"""trim_consumed / trim_segments_below: remove the closed segments every named durable
subscription has passed (its lowest unacknowledged offset, else its position); never
below a subscription that has not started or lags; crash-safe like the other trims.
Tests taking ``make_log`` run on disk and in memory; reopen and crash tests are
disk-only."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.storage._cleaner import Crash, abandon, all_messages, crash_at, keyed_log, leftover_files

import seglog
from seglog.storage import check, trim_consumed, trim_segments_below
from seglog.storage.log import subscription
from seglog.storage.segment.swap import stepping

MakeLog = Callable[..., seglog.Log]


def _bases(log: seglog.Log) -> list[int]:
    return [s.base_offset for s in log.segments()]


def _expected_start(bases: list[int], floor: int) -> int:
    """The base of the first segment not wholly below ``floor`` (never the active one)."""
    kept = [b for b, nxt in itertools.pairwise(bases) if nxt > floor]
    return kept[0] if kept else bases[-1]


def _consume(sub: seglog.storage.Subscription, n: int, ack_upto: int) -> None:
    """Deliver ``n`` messages to ``sub`` and ack the offsets below ``ack_upto``."""
    got: list[int] = []
    while len(got) < n:
        got += [d.offset for d in sub.fetch(n - len(got), 5.0)]
    sub.ack([o for o in got if o < ack_upto])


def test_removes_exactly_the_segments_below_the_lowest_reader(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 120)
    bases = _bases(log)
    assert len(bases) > 6
    with log.subscribe("fast", max_in_flight=1000) as fast, log.subscribe("slow") as slow:
        _consume(fast, 100, ack_upto=100)  # floor of fast: position 100
        _consume(slow, 40, ack_upto=30)  # floor of slow: pending 30..39 → 30
        before = all_messages(log)
        res = trim_consumed(log, ["fast", "slow"])
        start = _expected_start(bases, 30)
        assert start > bases[0]
        assert res.log_start_offset == log.log_start_offset == start
        assert res.segments == tuple(b for b in bases if b < start)
        assert res.bytes_freed > 0
        assert _bases(log) == [b for b in bases if b >= start]
        assert all_messages(log) == [m for m in before if m.offset >= start]
        # slow's unacked offsets are still there: redelivered after the ack wait
        assert set(slow.pending()) == set(range(30, 40))
        # nothing more to remove until slow acks
        assert trim_consumed(log, ["fast", "slow"]).segments == ()
        slow.ack(range(30, 40))
        _consume(slow, 60, ack_upto=100)  # slow at 100 too
        res = trim_consumed(log, ["slow", "fast"])
        assert log.log_start_offset == _expected_start(bases, 100) > start
        assert res.segments
        assert res.segments[0] == start
        # the subscriptions go on from where they were
        assert [d.offset for d in fast.fetch(5, 5.0)] == [100, 101, 102, 103, 104]
        assert fast.position == 105


def test_an_unstarted_subscription_blocks_and_is_not_created(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 90)
    with log.subscribe("a", max_in_flight=1000) as a:
        _consume(a, 90, ack_upto=90)
    res = trim_consumed(log, ["a", "not-yet"])
    assert res.segments == ()
    assert log.log_start_offset == 0
    assert log.subscriptions() == ["a"]  # read-only: no state made for "not-yet"
    assert trim_consumed(log, []).segments == ()  # no reader named: no floor
    assert trim_consumed(log, ["a"]).log_start_offset == _bases(log)[0] > 0


def test_a_lagging_subscription_blocks(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 90)
    with log.subscribe("a", max_in_flight=1000) as a, log.subscribe("lag") as lag:
        _consume(a, 90, ack_upto=90)
        assert trim_consumed(log, ["a", "lag"]).segments == ()  # lag never fetched
        _consume(lag, 40, ack_upto=40)  # lag's position: 40, fast's 90
        bases = _bases(log)
        res = trim_consumed(log, ["a", "lag"])
        assert log.log_start_offset == _expected_start(bases, 40) > 0
        assert all(b < 40 for b in res.segments)
        assert [d.offset for d in lag.fetch(1, 5.0)] == [40]


def test_an_unacked_offset_holds_the_floor(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 90)
    with log.subscribe("s", max_in_flight=1000) as s:
        _consume(s, 80, ack_upto=80)
    with log.subscribe("t", max_in_flight=1000) as t:
        got: list[int] = []
        while len(got) < 80:
            got += [d.offset for d in t.fetch(80 - len(got), 5.0)]
        t.ack([o for o in got if o != 17])  # 17 stays unacknowledged
        bases = _bases(log)
        trim_consumed(log, ["s", "t"])
        assert log.log_start_offset == _expected_start(bases, 17) <= 17
        assert t.pending() == {17: 0}
        assert log.get(17).value == b"v17"


def test_floor_reads_state_without_changing_it(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 60)
    with log.subscribe("s") as s:
        _consume(s, 50, ack_upto=45)
        state = path / "subscriptions" / "s.sub"
        data = state.read_bytes()
        assert subscription.floor(log, "s") == 45  # a live subscription: its journal
        assert state.read_bytes() == data
    assert subscription.floor(log, "missing") is None
    assert not (path / "subscriptions" / "missing.sub").exists()
    with pytest.raises(ValueError, match="invalid subscription name"):
        subscription.floor(log, "../x")
    with pytest.raises(TypeError):
        trim_consumed(log, "s")
    log.close()
    with seglog.open_log(path) as log:  # closed subscriptions: read from their files
        bases = _bases(log)
        trim_consumed(log, ["s"])
        assert log.log_start_offset == _expected_start(bases, 45)
        with log.subscribe("s") as s:
            assert s.position == 50
            assert sorted(s.pending()) == list(range(45, 50))


def test_trim_segments_below_caps_at_the_high_watermark(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 60)
    bases = _bases(log)
    res = trim_segments_below(log, 10**9)
    assert log.log_start_offset == bases[-1]  # never the active segment
    assert res.segments == tuple(bases[:-1])
    assert [m.offset for m in all_messages(log)] == list(range(bases[-1], 60))


@pytest.mark.parametrize("step", ["checkpoint", "renamed", "unlinked"])
@pytest.mark.parametrize("nth", [1, 2])
def test_crash_at_each_step(tmp_path: Path, step: str, nth: int) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 90)
    with log.subscribe("s", max_in_flight=1000) as s:
        _consume(s, 60, ack_upto=50)
    before = all_messages(log)
    target = _expected_start(_bases(log), 50)
    with pytest.raises(Crash), stepping(crash_at(step, 1 if step == "checkpoint" else nth)):
        trim_consumed(log, ["s"])
    abandon(log)
    with seglog.open_log(path) as log:
        # the commit point is the checkpoint: afterwards the new start holds
        assert log.log_start_offset == target
        assert all_messages(log) == [m for m in before if m.offset >= target]
        assert leftover_files(path) == []
        res = trim_consumed(log, ["s"])  # finishes: removes what is wholly below
        assert log.segments()[0].base_offset == target
        assert all(b < target for b in res.segments)
        with log.subscribe("s") as s:  # the subscription is intact
            assert s.position == 60
            assert sorted(s.pending()) == list(range(50, 60))
    assert all(r.ok for r in check(path))
