"""Iceberg topics: a topic's records committed by the broker to an Apache Iceberg table
through pyiceberg (topic config ``seglog.iceberg.mode``).

- names and settings (``_names``, no pyiceberg): ``MODE_CONFIG``, ``LAG_CONFIG``,
  ``iceberg_mode``, ``iceberg_lag_ms``, ``catalog_properties``, ``table_name``,
  ``remote_warehouse`` / ``table_location`` (tables of tiered topics on the object store);
- the table (``_table``): ``open_catalog``, ``load_topic_table`` (``key_value`` schema,
  partitioned by ``hour(timestamp)``), ``committed_offsets`` (from the snapshot summary),
  ``data_files``, ``drop_topic_tables`` (a deleted topic's tables purged), ``stale_table``;
- commits (``_commit``): ``commit_ranges`` (one append per call, the partitions' next
  offsets in the snapshot summary), ``read_rows``;
- ``value_schema`` mode (``_avro``, ``_formats``, ``_values``): Avro, JSON Schema and
  Protobuf schemas as Iceberg schemas (``avro_table_schema``; ``arrow_table_schema`` of
  the Arrow type seglog's typed read gives the other two), ``SchemaLookup`` (the
  registry's schemas, followed from ``_schemas``), ``commit_values`` (decoded values to
  the table, the rest to the dead-letter table ``<topic>~dlq``).

Needs ``pyiceberg`` and ``pyarrow`` (the ``iceberg`` extra). Imports ``seglog.columnar``,
``seglog.schemas`` and ``seglog.storage``. The names of ``_names`` load with the package;
the others (and pyiceberg with them, ~1 s) on first use (PEP 562), so the broker pays for
pyiceberg only when a topic turns Iceberg on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog._lazy import load_export
from seglog.iceberg._names import (
    DEFAULT_LAG_MS,
    DLQ_SUFFIX,
    KEY_VALUE,
    LAG_CONFIG,
    MODE_CONFIG,
    MODES,
    NAMESPACE,
    OFFSETS_PREFIX,
    TOPIC_ID_KEY,
    VALUE_SCHEMA,
    catalog_properties,
    dlq_table_name,
    iceberg_lag_ms,
    iceberg_mode,
    remote_warehouse,
    table_identifier,
    table_location,
    table_name,
    tiered,
)

if TYPE_CHECKING:
    from seglog.iceberg._avro import UnsupportedSchemaError, avro_table_schema
    from seglog.iceberg._commit import CommitReport, OffsetRange, commit_ranges, read_rows
    from seglog.iceberg._formats import arrow_table_schema
    from seglog.iceberg._schema import DLQ_SCHEMA, KEY_VALUE_SCHEMA, hour_spec
    from seglog.iceberg._table import (
        committed_offsets,
        data_files,
        drop_topic_tables,
        load_topic_table,
        open_catalog,
        stale_table,
        summary_of,
    )
    from seglog.iceberg._values import SchemaLookup, ValueCommit, commit_values

__all__ = [
    "DEFAULT_LAG_MS",
    "DLQ_SCHEMA",
    "DLQ_SUFFIX",
    "KEY_VALUE",
    "KEY_VALUE_SCHEMA",
    "LAG_CONFIG",
    "MODES",
    "MODE_CONFIG",
    "NAMESPACE",
    "OFFSETS_PREFIX",
    "TOPIC_ID_KEY",
    "VALUE_SCHEMA",
    "CommitReport",
    "OffsetRange",
    "SchemaLookup",
    "UnsupportedSchemaError",
    "ValueCommit",
    "arrow_table_schema",
    "avro_table_schema",
    "catalog_properties",
    "commit_ranges",
    "commit_values",
    "committed_offsets",
    "data_files",
    "dlq_table_name",
    "drop_topic_tables",
    "hour_spec",
    "iceberg_lag_ms",
    "iceberg_mode",
    "load_topic_table",
    "open_catalog",
    "read_rows",
    "remote_warehouse",
    "stale_table",
    "summary_of",
    "table_identifier",
    "table_location",
    "table_name",
    "tiered",
]

_WHERE = {
    "UnsupportedSchemaError": "_avro",
    "avro_table_schema": "_avro",
    "arrow_table_schema": "_formats",
    "SchemaLookup": "_values",
    "ValueCommit": "_values",
    "commit_values": "_values",
    "DLQ_SCHEMA": "_schema",
    "CommitReport": "_commit",
    "OffsetRange": "_commit",
    "commit_ranges": "_commit",
    "read_rows": "_commit",
    "KEY_VALUE_SCHEMA": "_schema",
    "hour_spec": "_schema",
    "committed_offsets": "_table",
    "data_files": "_table",
    "drop_topic_tables": "_table",
    "stale_table": "_table",
    "load_topic_table": "_table",
    "open_catalog": "_table",
    "summary_of": "_table",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    return load_export(__name__, _WHERE, name)
