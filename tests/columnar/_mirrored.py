"""A data directory of mirrored topics (``seglog.parquet.mirror=true``, small segments),
shared by the columnar, CLI and Spark tests of topic mirrors."""

from __future__ import annotations

from pathlib import Path

from seglog.columnar import sync_mirrors
from seglog.storage import DataDir, Message

TOPIC = "mirrored"
PARTITIONS = 2
PER_PARTITION = 600


def fill(path: Path, topic: str = TOPIC, *, keys: int | None = None) -> None:
    """``PER_PARTITION`` records per partition in batches of 10, small segments (6 per
    partition), with headers on every third record; with ``keys``, the first 200 records of
    a partition cycle through that many keys (for compaction), the rest have unique keys."""
    with DataDir(path) as data_dir:
        data_dir.create_topic(
            topic, PARTITIONS, {"segment.bytes": "4096", "seglog.parquet.mirror": "true"}
        )
        for p in range(PARTITIONS):
            log = data_dir.log(topic, p)
            for first in range(0, PER_PARTITION, 10):
                log.publish(
                    [
                        Message(
                            key=(f"k{i % keys}" if keys and i < 200 else f"u{i}").encode(),
                            value=f"p{p}-v{i}".encode() * 3,
                            headers=[("h", f"{i}".encode())] if i % 3 == 0 else [],
                        )
                        for i in range(first, first + 10)
                    ]
                )
            log.sync()


def mirrored_data(tmp_path: Path) -> Path:
    """``tmp_path / "data"`` filled (``fill``) and every closed segment mirrored."""
    path = tmp_path / "data"
    fill(path)
    report = sync_mirrors(path)
    assert len(report.built) == 2 * 5  # every closed segment of both partitions
    assert report.removed == []
    return path
