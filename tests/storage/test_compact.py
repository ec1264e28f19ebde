"""Compaction: last record per key, tombstones, min.compaction.lag.ms, the active segment,
offsets kept with gaps, batch properties, crash at each step of the swap. Tests taking
``make_log`` run on disk and in memory; reopen and crash tests are disk-only."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from tests.storage._cleaner import Crash, abandon, all_messages, crash_at, keyed_log, leftover_files

import seglog
from seglog.errors import NotFoundError
from seglog.storage import Message, check, compact, compact_deletes, compact_updates
from seglog.storage.record.batch import parse_header
from seglog.storage.segment.swap import stepping

NOW = 10**12  # far after every test timestamp
MakeLog = Callable[..., seglog.Log]


def _last_per_key(msgs: list[Message]) -> dict[bytes | None, Message]:
    last: dict[bytes | None, Message] = {}
    for m in msgs:
        last[m.key] = m
    return last


def _expected_after(before: list[Message], active_base: int) -> list[Message]:
    last = {k: m.offset for k, m in _last_per_key(before).items()}
    return [m for m in before if m.offset >= active_base or last[m.key] == m.offset]


def test_keeps_the_last_record_per_key_with_offsets_and_gaps(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 150, keys=10)
    before = all_messages(log)
    active = log.segments()[-1].base_offset
    res = compact(log, now_ms=NOW)
    after = all_messages(log)
    assert after == _expected_after(before, active)
    assert res.offsets == sorted({m.offset for m in before} - {m.offset for m in after})
    assert res.bytes_freed > 0
    assert log.log_start_offset == 0
    assert log.log_end_offset == 150
    for m in after:  # every kept record at its own offset
        assert log.get(m.offset) == m
    gone = res.offsets[0]
    with pytest.raises(NotFoundError):
        log.get(gone)
    nxt, msgs = log.consume(gone, 3)  # consume from inside a gap
    assert msgs == [m for m in after if m.offset > gone][:3]
    assert nxt == msgs[-1].offset + 1
    assert compact(log, now_ms=NOW).offsets == []  # nothing left to do
    log.close()
    with seglog.open_log(path) as log:  # reopen (clean): same records
        assert all_messages(log) == after
    (path / ".clean_shutdown").unlink(missing_ok=True)
    with seglog.open_log(path) as log:  # reopen after a "crash": rescans with gaps
        assert all_messages(log) == after
        assert log.offset_for_time(0) == (after[0].offset, after[0].timestamp)
    assert all(r.ok and not r.index_problems for r in check(path))


def test_active_segment_and_unkeyed_records_untouched(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=1 << 20)
    for i in range(20):
        log.publish([Message(key=b"same", value=b"%d" % i), Message(value=b"nokey%d" % i)])
    before = all_messages(log)
    assert compact(log, now_ms=NOW).offsets == []  # one segment: the active one
    assert all_messages(log) == before
    log.close()
    log = keyed_log(make_log, 60, keys=3)
    log.publish([Message(value=b"unkeyed", timestamp=5)])
    active = log.directory / f"{log.segments()[-1].base_offset:020d}.log"
    active_bytes = active.read_bytes()
    compact(log, now_ms=NOW)
    assert active.read_bytes() == active_bytes
    assert b"unkeyed" in [m.value for m in all_messages(log)]
    log.close()


def test_tombstones_dropped_only_after_delete_retention(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 60, keys=3)
    log.publish([Message(key=b"k0", value=None, timestamp=2_000)])  # tombstone for k0
    for _ in range(30):  # later segments: the tombstone's segment becomes cleanable
        log.publish([Message(key=b"k1", value=b"x" * 40, timestamp=2_001)])
    assert log.segments()[-1].base_offset > 60
    compact(log, delete_retention_ms=1_000, now_ms=2_500)  # tombstone 500 ms old: kept
    msgs = all_messages(log)
    assert [m.offset for m in msgs if m.key == b"k0"] == [60]  # only the tombstone
    assert msgs[[m.key for m in msgs].index(b"k0")].value is None
    res = compact(log, delete_retention_ms=1_000, now_ms=3_001)  # now 1001 ms old: dropped
    assert 60 in res.offsets
    assert b"k0" not in {m.key for m in all_messages(log)}
    with pytest.raises(NotFoundError):
        log.get(60)
    log.close()


def test_min_compaction_lag_is_honoured(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 150, keys=10, ts0=1_000)
    segs = log.segments()
    young = segs[5].max_timestamp_ms  # segments from 5 on are younger than the lag
    lag = 100
    res = compact(log, min_compaction_lag_ms=lag, now_ms=young + lag - 1)
    assert res.offsets
    assert all(o < segs[5].base_offset for o in res.offsets)
    untouched = [m for m in all_messages(log) if m.offset >= segs[5].base_offset]
    assert [m.offset for m in untouched] == list(range(segs[5].base_offset, 150))
    log.close()


def test_before_bounds_updates_and_klevdb_forms(make_log: MakeLog) -> None:
    log = keyed_log(make_log, 100, keys=5, ts0=1_000)
    res = compact_updates(log, before_ms=1_040)  # only superseded records before t=1040
    assert res.offsets
    assert all(o < 40 for o in res.offsets)
    assert res.offsets == list(range(40))  # every one superseded by a later record
    assert [m.offset for m in all_messages(log)] == list(range(40, 100))  # 1040+: kept
    compact_updates(log)
    keys = [m.key for m in all_messages(log) if m.offset < log.segments()[-1].base_offset]
    assert len(keys) == len(set(keys))
    log.publish([Message(key=b"k1", value=None, timestamp=1_500)])
    for _ in range(8):
        log.publish([Message(key=b"zz", value=b"y" * 200, timestamp=1_600)])
    compact_updates(log)
    res = compact_deletes(log, before_ms=1_501)  # the k1 tombstone: last of its key
    assert list(res.offsets) == [100]
    assert b"k1" not in {m.key for m in all_messages(log)}
    log.close()


def _batch(*, codec: int, pid: int, records: list[tuple[bytes, bytes | None]], ts: int) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=3,
        base_sequence=7,
        batch_size=1 << 30,
    )
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=ts + i, key=k, value=v, headers=[("h", b"%d" % i)])
    return bytes(b.build())


def test_rebuilt_batches_keep_their_properties(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=4096)
    recs = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")]
    info = log.append(_batch(codec=1, pid=42, records=recs, ts=5_000))  # gzip
    log.sync()
    for i in range(60):  # later records for b and c, rolling segments
        log.publish([Message(key=b"bc"[i % 2 : i % 2 + 1], value=b"z" * 50, timestamp=6_000)])
    assert log.segments()[0].base_offset == 0
    assert len(log.segments()) >= 2
    compact(log, now_ms=NOW)
    raw = log.read(0, 1 << 20)
    h = parse_header(raw)
    assert h.base_offset == info.base_offset == 0
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 7)
    assert h.attributes & 7 in (0, 1)  # gzip kept unless it did not pay
    batch = DefaultRecordBatch(raw[: h.size])
    assert batch.validate_crc()
    kept = list(batch)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in kept] == [(2, b"a", b"3", 5_002)]
    assert kept[0].headers == [("h", b"2")]
    log.close()


def test_log_append_time_batches_keep_their_time(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=1024, message_timestamp_type="LogAppendTime")
    log.publish([Message(key=b"a", value=b"1"), Message(key=b"b", value=b"2")])
    stamp = parse_header(log.read(0, 1 << 20)).max_timestamp
    for _ in range(30):
        log.publish([Message(key=b"a", value=b"x" * 60)])
    time.sleep(0.002)
    compact(log)
    raw = log.read(0, 1 << 20)
    h = parse_header(raw)
    assert h.attributes & 0x08
    assert h.max_timestamp == stamp
    assert [
        (m.offset, m.key, m.timestamp)
        for m in seglog.storage.record.message.decode_batches(raw[: h.size])
    ] == [(1, b"b", stamp)]
    log.close()


@pytest.mark.parametrize("step", ["cleaned", "swap", "log-live", "indexes-live"])
@pytest.mark.parametrize("nth", [1, 3])
def test_crash_at_each_compaction_step(tmp_path: Path, step: str, nth: int) -> None:
    path = tmp_path / "t-0"
    log = keyed_log(path, 150, keys=10)
    before = all_messages(log)
    active = log.segments()[-1].base_offset
    new = _expected_after(before, active)
    with pytest.raises(Crash), stepping(crash_at(step, nth)):
        compact(log, now_ms=NOW)
    abandon(log)
    with seglog.open_log(path) as log:
        after = all_messages(log)
        assert leftover_files(path) == []
        # per segment: exactly the old or the new records
        kept = {m.offset for m in after}
        for seg in log.segments():
            lo, hi = seg.base_offset, seg.next_offset if seg.size else seg.base_offset
            old_part = [m.offset for m in before if lo <= m.offset < hi]
            new_part = [m.offset for m in new if lo <= m.offset < hi]
            got = sorted(o for o in kept if lo <= o < hi)
            assert got in (old_part, new_part) or (not seg.size and not new_part)
        # the crashed segment itself: committed from "swap" on
        first = log.segments()[nth - 1]
        first_new = [m.offset for m in new if first.base_offset <= m.offset < first.next_offset]
        if step != "cleaned":
            assert (
                sorted(o for o in kept if first.base_offset <= o < first.next_offset) == first_new
            )
        assert _last_per_key(after) == _last_per_key(before)  # nothing acknowledged lost
        assert set(kept) <= {m.offset for m in before}
        assert {m.offset for m in new} <= kept
        compact(log, now_ms=NOW)
        assert all_messages(log) == new
    assert all(r.ok for r in check(path))


def test_uncompressed_batches_spliced_record_by_record(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = seglog.open_log(path, create=True, segment_bytes=2048)
    for i in range(20):  # batches of 7 records, keys repeating across and within batches
        log.publish(
            [
                Message(
                    key=b"u%d" % (i * 7 + j) if j % 3 == 0 else b"k%d" % ((i * 7 + j) % 9),
                    value=b"v%d" % (i * 7 + j) * (1 + j),
                    timestamp=5_000 + i * 7 + j,
                    headers=[("n", b"%d" % j)],
                )
                for j in range(7)
            ]
        )
    before = all_messages(log)
    active = log.segments()[-1].base_offset
    compact(log, now_ms=NOW)
    after = all_messages(log)
    assert after == _expected_after(before, active)
    partial = 0
    for seg in log.segments()[:-1]:
        data = (log.directory / f"{seg.base_offset:020d}.log").read_bytes()
        pos = 0
        while pos < seg.size:
            h = parse_header(data[pos : pos + 61])
            raw = data[pos : pos + h.size]
            batch = DefaultRecordBatch(raw)
            assert batch.validate_crc()
            recs = list(batch)
            assert h.record_count == len(recs)
            assert h.last_offset == recs[-1].offset
            assert h.max_timestamp == max(r.timestamp for r in recs)
            partial += h.record_count < 7
            pos += h.size
    assert partial  # some batches kept only part of their records
    log.close()
    (path / ".clean_shutdown").unlink()
    with seglog.open_log(path) as log:
        assert all_messages(log) == after
    assert all(r.ok for r in check(path))
