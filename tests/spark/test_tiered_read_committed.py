"""Spark's path mode, read_committed, over a tiered topic (``file://`` tier): the history
only the store holds is read by the executors from the store, its aborted transactions
from the remote ``.txnindex`` (and, for one aborted in a local segment, from the plan),
and only committed records become rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.storage._tier_txns import write_transactions

from seglog.storage import DataDir, RemoteStorage, tier_sync


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[int]]:
    root = tmp_path_factory.mktemp("tiered-txns")
    remote = RemoteStorage(f"file://{root / 'tier'}", cache_dir=str(root / "cache"))
    path = root / "data"
    configs = {
        "remote.storage.enable": "true",
        "local.retention.bytes": "0",
        "seglog.segment.messages": "10",
    }
    with DataDir(path, remote=remote) as data_dir:
        data_dir.create_topic("txns", 1, configs)
        log = data_dir.log("txns", 0)
        visible, _ = write_transactions(log)
        log.sync()
        assert tier_sync(log).error is None
        assert log.local_log_start_offset > 60  # every transaction starts remote
    return str(path), visible


def test_path_mode_read_committed_over_tiered_history(
    spark: Any, tiered: tuple[str, list[int]]
) -> None:
    path, visible = tiered
    assert not (Path(path) / "txns-0" / f"{0:020d}.txnindex").exists()
    df = (
        spark.read.format("seglog")
        .option("subscribe", "txns")
        .option("kafka.isolation.level", "read_committed")
        .load(path)
    )
    rows = df.select("offset", "value").collect()
    assert sorted(r.offset for r in rows) == visible
    assert not [r for r in rows if bytes(r.value).startswith(b"abort")]
    uncommitted = spark.read.format("seglog").option("subscribe", "txns").load(path)
    assert uncommitted.count() > len(visible)
