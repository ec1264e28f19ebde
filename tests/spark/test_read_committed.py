"""Path mode and ``read_topic`` honour ``kafka.isolation.level`` (default read_uncommitted,
as Spark's Kafka source): read_committed stops at the last stable offset and drops the
records of aborted transactions; markers are never rows; mirrors hold committed records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.columnar._transactional import TOPIC, Written, fill_transactions

from seglog.columnar import sync_mirrors
from seglog.spark import read_topic
from seglog.spark._read_topic import plan_topic_read


@pytest.fixture(scope="module")
def txns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Written]:
    path = tmp_path_factory.mktemp("txns") / "data"
    written = fill_transactions(path)
    return path, written


def _offsets(df: Any) -> list[int]:
    return sorted(r["offset"] for r in df.select("offset").collect())


def _read(spark: Any, path: Path, level: str | None) -> Any:
    reader = spark.read.format("seglog").option("subscribe", TOPIC)
    if level is not None:
        reader = reader.option("kafka.isolation.level", level)
    return reader.load(str(path))


def test_path_mode_isolation_levels(spark: Any, txns: tuple[Path, Written]) -> None:
    path, written = txns
    assert _offsets(_read(spark, path, None)) == written.records  # the default
    assert _offsets(_read(spark, path, "read_uncommitted")) == written.records
    assert _offsets(_read(spark, path, "read_committed")) == written.committed
    with pytest.raises(Exception, match=r"isolation\.level"):
        _read(spark, path, "read_dirty").collect()


def test_read_topic_isolation_levels(spark: Any, tmp_path: Path) -> None:
    written = fill_transactions(tmp_path)
    sync_mirrors(tmp_path)
    committed_plan = plan_topic_read(tmp_path, TOPIC, isolation_level="read_committed")
    assert any(p.mirror for p in committed_plan)
    assert max(p.end for p in committed_plan) == written.lso
    # every mirrored segment holds an aborted transaction: read_uncommitted reads the log
    assert not any(p.mirror for p in plan_topic_read(tmp_path, TOPIC))
    got = read_topic(spark, tmp_path, TOPIC, isolation_level="read_committed")
    assert _offsets(got) == written.committed
    assert _offsets(read_topic(spark, tmp_path, TOPIC)) == written.records
    # a larger tail than the local snapshot takes: format("seglog") tasks, same rows
    got = read_topic(spark, tmp_path, TOPIC, isolation_level="read_committed", local_tail_bytes=0)
    assert _offsets(got) == written.committed
