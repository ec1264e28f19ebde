"""Columnar topic mirrors (``seglog.columnar``): one Parquet file per closed segment,
holding exactly its records with Spark's Kafka schema; a second sync has nothing to do."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from seglog.columnar import arrow_schema, mirrors_of, sync_mirrors
from seglog.storage import DataDir

from ._mirrored import PARTITIONS, TOPIC, mirrored_data
from ._transactional import TOPIC as TX_TOPIC
from ._transactional import fill_transactions


@pytest.fixture
def mirrored(tmp_path: Path) -> Path:
    return mirrored_data(tmp_path)


def test_mirror_files_hold_each_closed_segment(mirrored: Path) -> None:
    with DataDir(mirrored, create=False, read_only=True) as data_dir:
        for p in range(PARTITIONS):
            log = data_dir.log(TOPIC, p)
            mirrors = mirrors_of(log)
            segments = log.stats().segments
            # every segment but the active one, in order, contiguous
            assert [m.base_offset for m in mirrors] == [s.base_offset for s in segments[:-1]]
            for mirror, seg in zip(mirrors, segments, strict=False):
                table = pq.read_table(mirror.path)
                assert table.schema == arrow_schema(include_headers=True)
                assert table.column("offset").to_pylist() == list(
                    range(seg.base_offset, seg.next_offset)
                )
                assert set(table.column("partition").to_pylist()) == {p}
    # a second sync has nothing to do
    again = sync_mirrors(mirrored)
    assert again.built == []
    assert again.removed == []
    assert again.kept == 2 * 5


def test_mirrors_hold_committed_records_below_the_lso(tmp_path: Path) -> None:
    written = fill_transactions(tmp_path)
    sync_mirrors(tmp_path)
    with DataDir(tmp_path, create=False, read_only=True) as data_dir:
        log = data_dir.log(TX_TOPIC, 0)
        mirrors = mirrors_of(log)
        assert mirrors
        assert all(m.next_offset <= written.lso for m in mirrors)
        unmirrored = [s for s in log.stats().segments[:-1] if s.next_offset > written.lso]
        assert unmirrored  # the segment holding the open transaction's start
        rows: list[int] = []
        for m in mirrors:
            rows += pq.read_table(m.path).column("offset").to_pylist()
        covered = mirrors[-1].next_offset
        assert rows == [o for o in written.committed if o < covered]
