"""Where every pipeline's result goes: a topic (through the broker) and Parquet."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812

__all__ = ["publish_and_save"]


def publish_and_save(
    table: DataFrame, key: Column, columns: Sequence[str], *, bootstrap: str, topic: str, out: Path
) -> None:
    """Append ``table`` to ``topic`` (key ``key``, value the row's ``columns`` as JSON; a
    changelog: the last record per key is current) through ``format("seglog")``'s wire sink,
    and overwrite the Parquet directory ``out`` with it. ``table`` is cached for the two
    writes. Idempotent per call: a replayed micro-batch rewrites the same keys and file."""
    table.persist()
    try:
        (
            table.select(key.alias("key"), F.to_json(F.struct(*columns)).alias("value"))
            .write.format("seglog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .mode("append")
            .save()
        )
        table.coalesce(1).write.mode("overwrite").parquet(str(out))
    finally:
        table.unpersist()
