"""Topics as Arrow columns and Parquet files: the layer between the broker and storage.

- ``decode_batches``: stored record batches v2 → one ``pyarrow.RecordBatch`` with the
  columns of Spark's Kafka source (``arrow_schema``), vectorised with numpy;
- columnar topic mirrors (``sync_mirrors``, ``mirrors_of``): one Parquet file per closed
  segment, written beside the segment, that Spark scans natively
  (``seglog.spark.read_topic``);
- typed values (``TypedDecoder``): Confluent-framed Avro / JSON Schema / Protobuf values
  -> one Arrow struct column (Protobuf messages: ``ProtoTree``, the message Confluent's
  message indexes name: ``message_indexes``, ``indexed_message``), with the types Spark
  gives them (``avro_arrow_type``, ``json_schema_arrow_type``), writer schemas by id from
  a registry or from the data directory's ``_schemas`` topic (replayed by
  ``seglog.schemas.read_registry``); and back (``TypedEncoder``: struct column -> framed
  Avro, JSON Schema or Protobuf values, the Spark sink's typed writes).

Needs ``pyarrow`` (the ``spark`` extra). Imports only ``seglog.storage`` and
``seglog.schemas`` (the registry's ``_schemas`` replay); the broker imports it lazily, only
for topics with ``seglog.parquet.mirror=true``. Names are imported on first use (PEP 562):
``import seglog.columnar`` loads neither pyarrow nor numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog._lazy import load_export

if TYPE_CHECKING:
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
    from seglog.columnar._protobuf_tree import (
        PROTO_SCALARS,
        ProtoTree,
        indexed_message,
        message_indexes,
    )
    from seglog.columnar._registry import REGISTRY_BROKER_CONFIG, RegistryRef, discover_registry
    from seglog.columnar._schema import ARROW_HEADERS_TYPE, arrow_schema
    from seglog.columnar._typed import (
        FORMATS,
        MalformedValueError,
        TypedDecoder,
        frame,
        schema_id_of,
    )
    from seglog.columnar._typed_encode import TypedEncoder

_LAZY: dict[str, str] = {
    "avro_arrow_type": "_avro_types",
    "json_schema_arrow_type": "_avro_types",
    "BATCH_HEADER": "_decode",
    "columns_batch": "_decode",
    "decode_batches": "_decode",
    "empty_batch": "_decode",
    "MIRROR_CONFIG": "_mirror",
    "Mirror": "_mirror",
    "MirrorReport": "_mirror",
    "mirror_enabled": "_mirror",
    "mirrors_of": "_mirror",
    "sync_log_mirrors": "_mirror",
    "sync_mirrors": "_mirror",
    "value_decoder": "_mirror",
    "PROTO_SCALARS": "_protobuf_tree",
    "ProtoTree": "_protobuf_tree",
    "indexed_message": "_protobuf_tree",
    "message_indexes": "_protobuf_tree",
    "REGISTRY_BROKER_CONFIG": "_registry",
    "RegistryRef": "_registry",
    "discover_registry": "_registry",
    "ARROW_HEADERS_TYPE": "_schema",
    "arrow_schema": "_schema",
    "FORMATS": "_typed",
    "MalformedValueError": "_typed",
    "TypedDecoder": "_typed",
    "frame": "_typed",
    "schema_id_of": "_typed",
    "TypedEncoder": "_typed_encode",
}

__all__ = [
    "ARROW_HEADERS_TYPE",
    "BATCH_HEADER",
    "FORMATS",
    "MIRROR_CONFIG",
    "PROTO_SCALARS",
    "REGISTRY_BROKER_CONFIG",
    "MalformedValueError",
    "Mirror",
    "MirrorReport",
    "ProtoTree",
    "RegistryRef",
    "TypedDecoder",
    "TypedEncoder",
    "arrow_schema",
    "avro_arrow_type",
    "columns_batch",
    "decode_batches",
    "discover_registry",
    "empty_batch",
    "frame",
    "indexed_message",
    "json_schema_arrow_type",
    "message_indexes",
    "mirror_enabled",
    "mirrors_of",
    "schema_id_of",
    "sync_log_mirrors",
    "sync_mirrors",
    "value_decoder",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    return load_export(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
