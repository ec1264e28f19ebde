"""Spark's path mode over a tiered topic: the history whose segments exist only in the
object store (moto's S3 server) is read by the executors straight from the store, the
rest from the partition directory; the result equals what was written."""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from tests._s3 import S3Server

from seglog.spark._reader import OffsetRangePartition, RemoteRef, read_range
from seglog.storage import DataDir, Message, RemoteStorage, tier_sync

N = 600


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    server = S3Server()
    path = tmp_path_factory.mktemp("tiered") / "data"
    remote = RemoteStorage(
        server.bucket(), endpoint_url=server.endpoint, cache_dir=str(path.parent / "cache")
    )
    configs = {
        "remote.storage.enable": "true",
        "local.retention.bytes": "0",
        "seglog.segment.messages": "100",
    }
    with DataDir(path, remote=remote) as data_dir:
        data_dir.create_topic("history", 1, configs)
        log = data_dir.log("history", 0)
        for i in range(N):
            log.publish([Message(key=b"k%d" % i, value=b"v%05d" % i, timestamp=1_000 + i)])
        report = tier_sync(log)
        assert report.error is None
        assert len(report.deleted_local) == 5
        assert log.local_log_start_offset == 500
    yield {"path": str(path), "server": server}
    server.stop()


def test_spark_reads_the_tiered_history(spark: Any, tiered: dict[str, Any]) -> None:
    assert not (pathlib.Path(tiered["path"]) / "history-0" / f"{0:020d}.log").exists()
    df = spark.read.format("seglog").option("subscribe", "history").load(tiered["path"])
    rows = df.orderBy("offset").select("offset", "key", "value").collect()
    assert [r.offset for r in rows] == list(range(N))
    assert [bytes(r.value) for r in rows] == [b"v%05d" % i for i in range(N)]
    assert bytes(rows[123].key) == b"k123"


def test_an_executor_reads_remote_offsets_without_the_partition_directory(
    tiered: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    """The planned range carries the store: offsets below the local start are read from
    it alone (the path given does not exist on this 'executor')."""
    copy = tmp_path / "elsewhere"
    shutil.copytree(tiered["path"], copy)
    plan_path = str(copy)
    ref_dir = DataDir(plan_path, create=False, read_only=True)
    log = ref_dir.log("history", 0)
    tier = log.remote_tier
    assert tier is not None
    ref = RemoteRef(tier.settings.url, tier.settings.endpoint_url, tier.partition, 500)
    ref_dir.close()
    shutil.rmtree(copy)  # no partition directory at all now
    part = OffsetRangePartition(plan_path, "history", 0, 10, 450, False, True, remote=ref)
    offsets = [o for batch in read_range(part) for o in batch.column("offset").to_pylist()]
    assert offsets == list(range(10, 450))
