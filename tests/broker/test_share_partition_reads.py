"""A share partition reads only the record batches it hands out (whole stored batches,
MaxRecords a soft limit as in Kafka): each acquisition asked ``Log.read`` for the rest of
the segment and cut it afterwards (~22 MB per 500 records of a 200,000-record backlog),
so a share group's delivery rate fell as its backlog grew."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import seglog
from seglog.broker.coordinator.share_partition import ACCEPT, AckBatch, SharePartition
from seglog.storage import OFFSET_OLDEST
from seglog.storage.segment import segment as segment_module


def test_acquisition_reads_about_what_it_hands_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []  # bytes each pread of the segment files returned
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        data = real_pread(fd, n, offset)
        read.append(len(data))
        return data

    with seglog.open_log(tmp_path / "p", create=True) as log:
        value = b"v" * 100
        for _ in range(100):  # 100 batches of 1,000 records: ~12 MB in one segment
            log.publish_values([value] * 1000)
        sub = log.subscribe("share.g", start=OFFSET_OLDEST, max_in_flight=2000)
        sp = SharePartition("g", "t", 0, log=log, subscription=sub, lock_ms=30_000)
        monkeypatch.setattr(segment_module.os, "pread", counting_pread)
        ranges, batches = sp.acquire("m", 1500)  # whole batches: records 0..1999
        assert [(r.first_offset, r.last_offset) for r in ranges] == [(0, 1999)]
        assert len(batches) < 300_000  # the two batches (~240 KB)
        assert sum(read) < 3 << 20  # not the rest of the ~12 MB segment
        assert sp.acquire("m", 300) == ([], b"")  # 2,000 in flight: the limit
        assert sp.acknowledge("m", [AckBatch(0, 1999, [ACCEPT])]) == 0
        ranges, batches = sp.acquire("m", 300)  # the third batch, whole
        assert [(r.first_offset, r.last_offset) for r in ranges] == [(2000, 2999)]
        assert len(batches) < 150_000
        assert sum(read) < 6 << 20
