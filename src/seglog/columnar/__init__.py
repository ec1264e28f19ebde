"""Topics as Arrow columns and Parquet files: the layer between the broker and storage.

- ``decode_batches``: stored record batches v2 → one ``pyarrow.RecordBatch`` with the
  columns of Spark's Kafka source (``arrow_schema``), vectorised with numpy;
- columnar topic mirrors (``sync_mirrors``, ``mirrors_of``): one Parquet file per closed
  segment, written beside the segment, that Spark scans natively
  (``seglog.spark.read_topic``);
- typed values (``TypedDecoder``): Confluent-framed Avro / JSON Schema values -> one Arrow
  struct column, with the types Spark gives them (``avro_arrow_type``), writer schemas by
  id from a registry or from the data directory's ``_schemas`` topic (``load_schema_store``).

Needs ``pyarrow`` (the ``spark`` extra). Imports only ``seglog.storage``; the broker imports
it lazily, only for topics with ``seglog.parquet.mirror=true``.
"""

from __future__ import annotations

from seglog.columnar._avro_types import avro_arrow_type, json_schema_arrow_type
from seglog.columnar._decode import BATCH_HEADER, columns_batch, decode_batches, empty_batch
from seglog.columnar._mirror import (
    MIRROR_CONFIG,
    Mirror,
    MirrorReport,
    mirror_enabled,
    mirrors_of,
    sync_log_mirrors,
    sync_mirrors,
    value_decoder,
)
from seglog.columnar._protobuf_flat import PROTO_SCALARS
from seglog.columnar._registry import REGISTRY_BROKER_CONFIG, RegistryRef, discover_registry
from seglog.columnar._schema import ARROW_HEADERS_TYPE, arrow_schema
from seglog.columnar._schema_store import (
    SCHEMAS_TOPIC,
    RegisteredSchema,
    SchemaStore,
    load_schema_store,
)
from seglog.columnar._typed import FORMATS, MalformedValueError, TypedDecoder, frame, schema_id_of

__all__ = [
    "ARROW_HEADERS_TYPE",
    "BATCH_HEADER",
    "FORMATS",
    "MIRROR_CONFIG",
    "PROTO_SCALARS",
    "REGISTRY_BROKER_CONFIG",
    "SCHEMAS_TOPIC",
    "MalformedValueError",
    "Mirror",
    "MirrorReport",
    "RegisteredSchema",
    "RegistryRef",
    "SchemaStore",
    "TypedDecoder",
    "arrow_schema",
    "avro_arrow_type",
    "columns_batch",
    "decode_batches",
    "discover_registry",
    "empty_batch",
    "frame",
    "json_schema_arrow_type",
    "load_schema_store",
    "mirror_enabled",
    "mirrors_of",
    "schema_id_of",
    "sync_log_mirrors",
    "sync_mirrors",
    "value_decoder",
]
