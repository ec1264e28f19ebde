"""Durable subscriptions by range: ``fetch_ranges_now`` (whole stored batches, found from
their headers), ``ack_ranges`` / ``release_ranges``, group-committed ``sync`` after
``durable=False`` calls, and the journal of ranges that a restart and a kill -9 replay."""

from __future__ import annotations

import shutil
import threading

import pytest

from seglog import Message, open_log
from seglog.storage import delete_offsets


def _publish_batches(log, sizes: list[int]) -> None:
    """One record batch per size (``publish`` writes one batch per call)."""
    for n in sizes:
        start = log.next_offset()
        log.publish([Message(key=b"k%d" % (start + i), value=b"v") for i in range(n)])


def test_whole_batches_pass_max_count_to_the_batch_end(make_log, fake_clock):
    with make_log() as log:
        _publish_batches(log, [5, 5, 5])
        sub = log.subscribe("w", max_in_flight=6)
        assert sub.fetch_ranges_now(2, whole_batches=True) == [(0, 4, 0)]
        assert sub.position == 5
        # 5 in flight, room 1: the whole next batch still (soft limits)
        assert sub.fetch_ranges_now(10, whole_batches=True) == [(5, 9, 0)]
        assert sub.fetch_ranges_now(10, whole_batches=True) == []  # over max_in_flight
        assert sub.ack_ranges([(0, 4)]) == 5
        assert sub.fetch_ranges_now(3, whole_batches=True) == [(10, 14, 0)]
        assert sub.pending() == dict.fromkeys(range(5, 15), 0)
        # without whole_batches: max_count is exact, as fetch_offsets_now
        assert sub.ack_ranges([(5, 14)]) == 10


def test_ranges_split_on_partial_ack_and_release(make_log, fake_clock):
    with make_log() as log:
        _publish_batches(log, [10])
        sub = log.subscribe("w", ack_wait_ms=1000)
        assert sub.fetch_ranges_now(10) == [(0, 9, 0)]
        assert sub.ack_ranges([(2, 3), (7, 7)]) == 3
        assert sub.ack_ranges([(2, 3)]) == 0  # acknowledged already: a no-op
        assert sub.release_ranges([(4, 5)]) == 2
        assert sub.fetch_ranges_now(10) == [(4, 5, 1)]  # released: due at once, counted
        fake_clock.advance_ms(1000)
        got = sub.fetch_ranges_now(10)
        assert sorted(got) == [(0, 1, 1), (4, 5, 2), (6, 6, 1), (8, 9, 1)]
        assert sub.pending() == {0: 1, 1: 1, 4: 2, 5: 2, 6: 1, 8: 1, 9: 1}
        assert sub.lowest_pending() == 0
        with pytest.raises(ValueError, match="never delivered"):
            sub.ack_ranges([(9, 10)])
        with pytest.raises(ValueError, match="never delivered"):
            sub.release_ranges([(3, 2)])
        assert sub.pending() == {0: 1, 1: 1, 4: 2, 5: 2, 6: 1, 8: 1, 9: 1}


def test_whole_batches_skip_removed_records(tmp_path, fake_clock):
    with open_log(tmp_path / "p", create=True) as log:
        _publish_batches(log, [6, 4])
        delete_offsets(log, {1, 2, 7})  # the rewritten batches have gaps
        sub = log.subscribe("w")
        assert sub.fetch_ranges_now(1, whole_batches=True) == [(0, 0, 0), (3, 5, 0)]
        assert sub.fetch_ranges_now(100, whole_batches=True) == [(6, 6, 0), (8, 9, 0)]
        assert sub.pending() == {0: 0, 3: 0, 4: 0, 5: 0, 6: 0, 8: 0, 9: 0}


def test_ranges_journal_survives_restart_and_kill_9(tmp_path, fake_clock):
    path = tmp_path / "p"
    with open_log(path, create=True) as log:
        _publish_batches(log, [100, 100])
        sub = log.subscribe("w")
        assert sub.fetch_ranges_now(150, whole_batches=True, durable=False) == [(0, 199, 0)]
        assert sub.ack_ranges([(10, 189)], durable=False) == 180
        sub.sync()
        crashed = tmp_path / "crashed"
        shutil.copytree(path, crashed)  # what a kill -9 leaves: the journal as written
        journal = (crashed / "subscriptions" / "w.sub").read_bytes()
        assert len(journal.splitlines()) == 3  # snapshot, one delivery line, one ack line
    for directory in (path, crashed):
        with open_log(directory) as log:
            sub = log.subscribe("w")
            expected = dict.fromkeys([*range(10), *range(190, 200)], 0)
            assert sub.pending() == expected
            assert sub.position == 200
            assert sub.fetch_ranges_now(100) == [(0, 9, 1), (190, 199, 1)]


def test_concurrent_durable_acks_share_fsyncs(tmp_path, fake_clock):
    with open_log(tmp_path / "p", create=True) as log:
        _publish_batches(log, [400])
        sub = log.subscribe("w", max_in_flight=400)
        sub.fetch_ranges_now(400)
        errors: list[BaseException] = []

        def ack(i: int) -> None:
            try:
                for o in range(i, 400, 8):
                    assert sub.ack_ranges([(o, o)]) == 1
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=ack, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sub.pending() == {}
    with open_log(tmp_path / "p") as log:
        assert log.subscribe("w").pending() == {}
