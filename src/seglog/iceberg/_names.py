"""Iceberg topics' names and settings, without pyiceberg (cheap to import: the broker reads
them for every topic).

- topic config ``seglog.iceberg.mode``: ``disabled`` (default), ``key_value`` or
  ``value_schema`` (Redpanda's ``redpanda.iceberg.mode`` modes);
- topic config ``seglog.iceberg.lag.ms``: the most the table may lag the log, in ms
  (Redpanda's ``redpanda.iceberg.target.lag.ms``; default one minute): rows of the active
  segment are committed once it has passed, without waiting for a roll;
- the table of topic ``T`` is ``seglog.T`` (namespace :data:`NAMESPACE`), its dead-letter
  table ``seglog.T~dlq`` (``~`` is never in a topic name, so no topic's table collides);
- snapshot summary keys ``seglog.offsets.<partition>`` = the next offset of that partition
  the table holds (every partition, carried from snapshot to snapshot) and
  ``seglog.topic-id``: the exactly-once record of what is committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "DEFAULT_LAG_MS",
    "DLQ_SUFFIX",
    "KEY_VALUE",
    "LAG_CONFIG",
    "MODES",
    "MODE_CONFIG",
    "NAMESPACE",
    "OFFSETS_PREFIX",
    "SYNCED_FILE_IO",
    "TOPIC_ID_KEY",
    "VALUE_SCHEMA",
    "catalog_properties",
    "dlq_table_name",
    "iceberg_lag_ms",
    "iceberg_mode",
    "table_identifier",
    "table_name",
]

MODE_CONFIG = "seglog.iceberg.mode"
"""Topic config: how a topic maps to an Iceberg table (:data:`MODES`)."""
LAG_CONFIG = "seglog.iceberg.lag.ms"
"""Topic config: the most the table may lag the log, in ms (:data:`DEFAULT_LAG_MS`)."""
DISABLED = "disabled"
KEY_VALUE = "key_value"
"""Mode: columns key, value (binary), partition, offset, timestamp, headers."""
VALUE_SCHEMA = "value_schema"
"""Mode: the value's registered schema as columns (Confluent wire format values)."""
MODES = (DISABLED, KEY_VALUE, VALUE_SCHEMA)
DEFAULT_LAG_MS = 60_000
"""Redpanda's default ``iceberg_target_lag_ms``: one minute."""
NAMESPACE = "seglog"
"""The catalog namespace of every topic's table."""
DLQ_SUFFIX = "~dlq"
"""The dead-letter table of topic ``T`` is ``T~dlq`` (Redpanda's name)."""
OFFSETS_PREFIX = "seglog.offsets."
"""Snapshot summary key prefix: ``seglog.offsets.<partition>`` = next offset committed."""
TOPIC_ID_KEY = "seglog.topic-id"
"""Snapshot summary key: the topic id the offsets belong to (a re-created topic starts
over)."""


SYNCED_FILE_IO = "seglog.iceberg._fileio.SyncedFileIO"
"""pyiceberg's ``py-io-impl`` for a local warehouse: files fsynced before the commit."""


def iceberg_mode(configs: Mapping[str, str]) -> str | None:
    """The Iceberg mode of a topic's configs: ``key_value`` or ``value_schema``; None when
    ``disabled`` (the default) or unknown."""
    mode = configs.get(MODE_CONFIG, DISABLED).strip().lower()
    return mode if mode in (KEY_VALUE, VALUE_SCHEMA) else None


def iceberg_lag_ms(configs: Mapping[str, str]) -> int:
    """A topic's ``seglog.iceberg.lag.ms`` (default :data:`DEFAULT_LAG_MS`; a value that is
    no positive integer counts as the default)."""
    try:
        value = int(configs.get(LAG_CONFIG, DEFAULT_LAG_MS))
    except ValueError:
        return DEFAULT_LAG_MS
    return value if value > 0 else DEFAULT_LAG_MS


def table_name(topic: str) -> str:
    """``seglog.<topic>``: a topic's table as logs and SQL name it (pyiceberg takes
    :func:`table_identifier`)."""
    return f"{NAMESPACE}.{topic}"


def table_identifier(topic: str, *, dlq: bool = False) -> tuple[str, str]:
    """``("seglog", topic)`` (``topic~dlq`` with ``dlq``): the identifier to give pyiceberg,
    which splits a string identifier at every dot (Kafka topic names may hold dots)."""
    return (NAMESPACE, topic + DLQ_SUFFIX if dlq else topic)


def dlq_table_name(topic: str) -> str:
    """``seglog.<topic>~dlq``: the dead-letter table of a ``value_schema`` topic."""
    return f"{NAMESPACE}.{topic}{DLQ_SUFFIX}"


def catalog_properties(
    data_dir: str | Path,
    catalog_type: str = "sql",
    uri: str | None = None,
    warehouse: str | None = None,
) -> dict[str, str]:
    """pyiceberg ``load_catalog`` properties of a broker's catalog (broker settings
    ``seglog.iceberg.catalog.type`` / ``.uri`` / ``.warehouse``).

    The default is a SQL catalog on SQLite at ``<data_dir>/iceberg/catalog.db`` with the
    warehouse beside it (``<data_dir>/iceberg/warehouse``); for ``rest`` (or any other
    pyiceberg catalog type) ``uri`` is the catalog's URL and ``warehouse`` is passed only
    when given. A local (``file://``) warehouse is written through
    :data:`SYNCED_FILE_IO` (every file fsynced before the catalog commit). Other
    properties (credentials, tokens) come from pyiceberg's environment variables,
    ``PYICEBERG_CATALOG__SEGLOG__<KEY>``."""
    props = {"type": catalog_type}
    root = Path(data_dir).resolve() / "iceberg"
    if catalog_type == "sql":
        props["uri"] = uri or f"sqlite:///{root / 'catalog.db'}"
        props["warehouse"] = warehouse or (root / "warehouse").as_uri()
    if props.get("warehouse", "").startswith("file:"):
        props["py-io-impl"] = SYNCED_FILE_IO
    else:
        if uri:
            props["uri"] = uri
        if warehouse:
            props["warehouse"] = warehouse
    return props
