"""Torn tails at every byte of the last batch, and every single-bit flip of a segment.

(tests/storage/test_recovery.py cuts a one-segment log of uncompressed batches; here the
last batch is compressed and sits in the last of several segments, and every cut is also
checked with ``check``, a read-only open and continued appends.)
"""

from __future__ import annotations

import os
import pathlib

import pytest
from tests.storage._batches import make_batch

from seglog.errors import LogCorruptedError
from seglog.storage import Log, LogConfig, check, recover
from seglog.storage.record.batch import parse_header

from .conftest import record_figure

CFG = LogConfig(segment_bytes=420, index_interval_bytes=100)


def _build(p: pathlib.Path, batches: list[bytes], cfg: LogConfig = CFG) -> dict[str, bytes]:
    with Log.open(p, cfg, create=True) as log:
        for b in batches:
            log.append(b)
        log.sync()
    return {n: (p / n).read_bytes() for n in os.listdir(p)}


def _restore(p: pathlib.Path, files: dict[str, bytes]) -> None:
    for n in os.listdir(p):
        if n not in files:
            (p / n).unlink()
    for n, data in files.items():
        if (p / n).read_bytes() != data if (p / n).exists() else True:
            (p / n).write_bytes(data)
    (p / ".clean_shutdown").unlink(missing_ok=True)  # every trial is a crash


def _batch_ends(data: bytes) -> list[int]:
    ends, pos = [], 0
    while pos < len(data):
        pos += parse_header(data, pos).size
        ends.append(pos)
    return ends


def _segments(p: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p.glob("*.log"))


def test_torn_tail_at_every_byte_of_the_last_compressed_batch(shm_path):
    p = shm_path / "p"
    batches = [make_batch(2, tag=b"%d" % i, value_size=40) for i in range(7)]
    batches.append(make_batch(6, codec="lz4", tag=b"last", value_size=60))
    files = _build(p, batches)
    last = _segments(p)[-1]
    full = files[last.name]
    ends = _batch_ends(full)
    assert len(_segments(p)) >= 3
    assert len(ends) >= 2
    start = ends[-2]  # the last batch is [start, len(full))
    base = int(last.name[:20])
    with Log.open(p, CFG, read_only=True) as log:
        prefix_end = log.log_end_offset - 6
        before = log.read(0, 1 << 20, upper=prefix_end)
    cuts = 0
    for cut in range(start, len(full)):
        _restore(p, files)
        os.truncate(last, cut)
        report = check(p)[0]
        if cut > start:
            assert not report.ok, cut
            assert report.torn_tail, cut
        assert report.log_end_offset == prefix_end, cut
        with Log.open(p, CFG, read_only=True) as ro:  # a reader beside a crashed writer
            assert ro.log_end_offset == prefix_end
        with Log.open(p, CFG) as log:  # crash recovery
            assert log.log_end_offset == prefix_end, cut
            assert os.path.getsize(last) == start
            assert log.read(0, 1 << 20) == before
            info = log.append(make_batch(1, tag=b"after"))
            assert info.base_offset == prefix_end
            log.sync()
        assert check(p)[0].ok
        cuts += 1
    del base
    record_figure(
        f"torn tail: {cuts} cut points in the last (lz4) batch of {len(full) - start} B, "
        f"each recovered to offset {prefix_end}, byte-identical prefix, appends resume"
    )


def _flip_trials(p: pathlib.Path, files: dict[str, bytes], seg: pathlib.Path, last: bool):
    data = files[seg.name]
    ends = _batch_ends(data)
    seg_base = int(seg.name[:20])
    batch_bases = [seg_base]
    for e in ends[:-1]:
        batch_bases.append(parse_header(data, e).base_offset)
    detected = checked = 0
    for bit in range(len(data) * 8):
        pos = bit // 8
        k = next(i for i, e in enumerate(ends) if pos < e)  # the batch holding the bit
        _restore(p, files)
        flipped = bytearray(data)
        flipped[pos] ^= 1 << (bit % 8)
        seg.write_bytes(flipped)
        report = check(p)[0]
        assert not report.ok, f"flip of bit {bit % 8} at byte {pos} of {seg.name} undetected"
        assert seg.read_bytes() == flipped  # check changes nothing
        detected += 1
        keep_end = batch_bases[k]  # everything before the damaged batch
        if last:
            # the last segment: crash recovery treats it as a torn tail and truncates
            with Log.open(p, CFG) as log:
                assert log.log_end_offset == keep_end, (bit, pos)
            kept = data[: (ends[k - 1] if k else 0)]
            assert (seg.read_bytes() if seg.exists() else b"") == kept  # empty: removed
            checked += 1
        else:
            # segments below the recovery point are trusted after a crash (fsynced at
            # roll, Kafka's rule): forget it, so the open CRC-scans the damaged segment
            (p / "recovery-point").unlink(missing_ok=True)
            with pytest.raises(LogCorruptedError):
                Log.open(p, CFG)
            assert seg.read_bytes() == flipped  # a refused open changes nothing
            if bit % 4 == 0:  # recover(): the longest valid prefix (every 4th bit: speed)
                rep = recover(p)[0]
                assert rep.log_end_offset == keep_end, (bit, pos)
                assert check(p)[0].ok
                with Log.open(p, CFG) as log:
                    assert log.log_end_offset == keep_end
                checked += 1
    return detected, checked, len(data)


def test_every_single_bit_flip_in_a_segment_is_detected(shm_path):
    p = shm_path / "p"
    batches = [make_batch(1, tag=b"%d" % i, value_size=8) for i in range(9)]
    files = _build(p, batches, LogConfig(segment_bytes=250, index_interval_bytes=100))
    segs = _segments(p)
    assert len(segs) >= 3
    middle = segs[1]
    assert len(_batch_ends(files[middle.name])) >= 2
    d1, c1, n1 = _flip_trials(p, files, middle, last=False)
    d2, c2, n2 = _flip_trials(p, files, segs[-1], last=True)
    record_figure(
        f"bit flips: {d1}/{n1 * 8} flips in a middle segment detected by check "
        f"(open refused each time, recover() verified on {c1}); {d2}/{n2 * 8} in the last "
        f"segment detected, crash recovery truncated to the batch before each ({c2})"
    )
    assert d1 == n1 * 8
    assert d2 == n2 * 8
