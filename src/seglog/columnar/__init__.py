"""Topics as Arrow columns and Parquet files: the layer between the broker and storage.

- ``decode_batches``: stored record batches v2 → one ``pyarrow.RecordBatch`` with the
  columns of Spark's Kafka source (``arrow_schema``), vectorised with numpy;
- columnar topic mirrors (``sync_mirrors``, ``mirrors_of``): one Parquet file per closed
  segment, written beside the segment, that Spark scans natively
  (``seglog.spark.read_topic``).

Needs ``pyarrow`` (the ``spark`` extra). Imports only ``seglog.storage``; the broker imports
it lazily, only for topics with ``seglog.parquet.mirror=true``.
"""

from __future__ import annotations

from seglog.columnar._decode import BATCH_HEADER, columns_batch, decode_batches, empty_batch
from seglog.columnar._mirror import (
    MIRROR_CONFIG,
    Mirror,
    MirrorReport,
    mirror_enabled,
    mirrors_of,
    sync_log_mirrors,
    sync_mirrors,
)
from seglog.columnar._schema import ARROW_HEADERS_TYPE, arrow_schema

__all__ = [
    "ARROW_HEADERS_TYPE",
    "BATCH_HEADER",
    "MIRROR_CONFIG",
    "Mirror",
    "MirrorReport",
    "arrow_schema",
    "columns_batch",
    "decode_batches",
    "empty_batch",
    "mirror_enabled",
    "mirrors_of",
    "sync_log_mirrors",
    "sync_mirrors",
]
