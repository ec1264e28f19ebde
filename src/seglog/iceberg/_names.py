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

import os
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
    "remote_warehouse",
    "table_identifier",
    "table_location",
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


def remote_warehouse(remote_url: str) -> str:
    """``<remote_url>/iceberg/warehouse``: where the tables of tiered Iceberg topics live
    when the broker has a remote store (``seglog.remote.storage.url``)."""
    return remote_url.rstrip("/") + "/iceberg/warehouse"


def table_location(warehouse: str, topic: str, *, dlq: bool = False) -> str:
    """``<warehouse>/seglog.db/<table>``: a table's location under a warehouse, in the
    layout of pyiceberg's (and Hive's, Spark's) ``<namespace>.db/<table>``."""
    return f"{warehouse.rstrip('/')}/{NAMESPACE}.db/{topic}{DLQ_SUFFIX if dlq else ''}"


def tiered(configs: Mapping[str, str]) -> bool:
    """The topic has ``remote.storage.enable=true`` (tiered storage)."""
    return configs.get("remote.storage.enable", "false").strip().lower() == "true"


def catalog_properties(
    data_dir: str | Path,
    catalog_type: str = "sql",
    uri: str | None = None,
    warehouse: str | None = None,
    *,
    remote_url: str | None = None,
    remote_endpoint_url: str | None = None,
) -> dict[str, str]:
    """pyiceberg ``load_catalog`` properties of a broker's catalog (broker settings
    ``seglog.iceberg.catalog.type`` / ``.uri`` / ``.warehouse``).

    The default is a SQL catalog on SQLite at ``<data_dir>/iceberg/catalog.db`` with the
    warehouse beside it (``<data_dir>/iceberg/warehouse``); for ``rest`` (or any other
    pyiceberg catalog type) ``uri`` is the catalog's URL and ``warehouse`` is passed only
    when given. A local (``file://``) warehouse is written through
    :data:`SYNCED_FILE_IO` (every file fsynced before the catalog commit). Other
    properties (credentials, tokens) come from pyiceberg's environment variables,
    ``PYICEBERG_CATALOG__SEGLOG__<KEY>``.

    With an ``s3://`` ``remote_url`` (the tier's ``seglog.remote.storage.url``), pyiceberg's
    S3 FileIO gets the tier's endpoint (``s3.endpoint`` = ``remote_endpoint_url``) and
    region (``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else ``us-east-1``, as the tier);
    credentials come from the same environment (``AWS_ACCESS_KEY_ID`` ...), so tables
    located on the store (:func:`remote_warehouse`) are written and read as the tier is."""
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
    if remote_url is not None and remote_url.startswith("s3://"):
        props["s3.region"] = (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        )
        if remote_endpoint_url:
            props["s3.endpoint"] = remote_endpoint_url
    return props
