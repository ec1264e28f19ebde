"""A topic's Iceberg table: the catalog, the table (created on first use), and the offsets
its snapshots say it holds.

Exactly once: every commit's snapshot summary records, for every partition of the topic,
the next offset the table holds (``seglog.offsets.<partition>``) and the topic id. Data
files are written before the catalog commit; a crash between the two leaves files no
snapshot references (harmless orphans) and the summary of the current snapshot unchanged,
so the committer resumes from the offsets it names: no row lost, none twice.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlparse

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, ancestors_of

from seglog.iceberg._avro import META_COLUMN, value_table_base
from seglog.iceberg._names import (
    KEY_VALUE,
    NAMESPACE,
    OFFSETS_PREFIX,
    TOPIC_ID_KEY,
    VALUE_SCHEMA,
    table_identifier,
)
from seglog.iceberg._schema import DLQ_SCHEMA, KEY_VALUE_SCHEMA, hour_spec

__all__ = [
    "TABLE_PROPERTIES",
    "committed_offsets",
    "data_files",
    "drop_topic_tables",
    "load_topic_table",
    "open_catalog",
    "stale_table",
    "summary_of",
]


TABLE_PROPERTIES = {"write.parquet.compression-codec": "snappy"}
"""Properties of the tables seglog creates: Snappy, as Spark's Parquet writer and seglog's
Parquet mirrors (pyiceberg's default, zstd, made Spark's scan of the table's files slower
than of the same rows in pyarrow's default Parquet)."""


def open_catalog(properties: dict[str, str]) -> Catalog:
    """pyiceberg's ``load_catalog("seglog", **properties)`` (``catalog_properties`` makes
    them), creating the directories of a local SQLite catalog and warehouse first."""
    uri = properties.get("uri", "")
    if properties.get("type") == "sql" and uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    warehouse = properties.get("warehouse", "")
    if warehouse.startswith("file://"):
        Path(urlparse(warehouse).path).mkdir(parents=True, exist_ok=True)
    catalog = load_catalog(NAMESPACE, **properties)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    return catalog


def load_topic_table(
    catalog: Catalog, topic: str, *, create: bool = True, mode: str = KEY_VALUE,
    dlq: bool = False, location: str | None = None,
) -> Table:  # fmt: skip
    """The table of ``topic`` (``seglog.<topic>``; with ``dlq`` its dead-letter table
    ``seglog.<topic>~dlq``), created when missing and ``create``: :data:`KEY_VALUE_SCHEMA`
    for ``key_value``, the ``seglog`` metadata column alone for ``value_schema`` (the
    value's columns come with the first schema), :data:`DLQ_SCHEMA` for a dead-letter
    table; partitioned by the hour of the record timestamp; at ``location`` when given
    (``table_location``: on the object store), else under the catalog's warehouse. An
    existing table stays where it is. Raises pyiceberg's
    ``NoSuchTableError`` when missing and not ``create``."""
    name = table_identifier(topic, dlq=dlq)
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        if not create:
            raise
    if dlq:
        schema, column = DLQ_SCHEMA, "timestamp"
    elif mode == VALUE_SCHEMA:
        schema, column = value_table_base(), f"{META_COLUMN}.timestamp"
    else:
        schema, column = KEY_VALUE_SCHEMA, "timestamp"
    return catalog.create_table_if_not_exists(
        name,
        schema=schema,
        partition_spec=hour_spec(schema, column),
        location=location,
        properties=TABLE_PROPERTIES,
    )


def drop_topic_tables(catalog: Catalog, topic: str, topic_id: uuid.UUID) -> list[str]:
    """Drop the tables of deleted topic ``topic`` (id ``topic_id``): ``seglog.<topic>``
    and its dead-letter table, purged (data, manifest and metadata files deleted with the
    catalog entry: pyiceberg's ``purge_table``), as Redpanda's ``iceberg_delete``. A table
    whose newest seglog snapshot names another topic id (the topic was created again and
    committed since) is kept; one without a seglog snapshot is dropped. Returns the
    identifiers dropped (missing tables are skipped). Raises what the catalog raises
    (unreachable, ...)."""
    dropped = []
    for dlq in (False, True):
        name = table_identifier(topic, dlq=dlq)
        try:
            table = catalog.load_table(name)
        except NoSuchTableError:
            continue
        owner = summary_of(table).get(TOPIC_ID_KEY)
        if owner is not None and owner != str(topic_id):
            continue
        try:
            catalog.purge_table(name)
        except NoSuchTableError:
            continue
        dropped.append(".".join(name))
    return dropped


def stale_table(table: Table, topic_id: uuid.UUID) -> bool:
    """The table's newest seglog snapshot belongs to another topic id: a deleted topic's
    table whose drop never ran (the broker stopped first); the topic created again under
    the name must not see its rows."""
    owner = summary_of(table).get(TOPIC_ID_KEY)
    return owner is not None and owner != str(topic_id)


def _seglog_snapshot(table: Table) -> Snapshot | None:
    """The newest ancestor of the current snapshot that seglog committed (one whose
    summary has seglog's keys: a snapshot another writer made, e.g. a compaction, has
    none and is skipped)."""
    current = table.current_snapshot()
    if current is None:
        return None
    for snapshot in ancestors_of(current, table.metadata):
        summary = snapshot.summary
        if summary is not None and TOPIC_ID_KEY in summary.additional_properties:
            return snapshot
    return None


def summary_of(table: Table) -> dict[str, str]:
    """seglog's keys in the summary of its newest snapshot ({} when none)."""
    snapshot = _seglog_snapshot(table)
    if snapshot is None or snapshot.summary is None:
        return {}
    props = snapshot.summary.additional_properties
    return {k: v for k, v in props.items() if k == TOPIC_ID_KEY or k.startswith(OFFSETS_PREFIX)}


def committed_offsets(table: Table, topic_id: uuid.UUID) -> dict[int, int]:
    """partition → next offset the table holds, from seglog's newest snapshot; {} when
    there is none or it belongs to another topic id (a topic deleted and created again)."""
    summary = summary_of(table)
    if summary.get(TOPIC_ID_KEY) != str(topic_id):
        return {}
    return {
        int(key.removeprefix(OFFSETS_PREFIX)): int(value)
        for key, value in summary.items()
        if key.startswith(OFFSETS_PREFIX)
    }


def data_files(table: Table) -> list[str]:
    """The local paths of the Parquet data files of the table's current snapshot (what
    ``spark.read.parquet(*data_files(table))`` scans without Iceberg's Spark runtime:
    right for append-only tables such as seglog's, which have no delete files)."""
    paths = []
    for task in table.scan().plan_files():
        location = task.file.file_path
        paths.append(urlparse(location).path if location.startswith("file:") else location)
    return paths
