"""Reading an Iceberg topic's table back, as a user would: pyiceberg's ``load_catalog``
on the broker's default SQL catalog, ``load_table("seglog.<topic>").scan().to_arrow()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from sqlalchemy.exc import OperationalError


def catalog(data_dir: Path) -> Catalog:
    """The default catalog of a broker on ``data_dir``."""
    root = data_dir.resolve() / "iceberg"
    return load_catalog(
        "seglog",
        type="sql",
        uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=(root / "warehouse").as_uri(),
    )


def rows(data_dir: Path, topic: str) -> pa.Table | None:
    """The table's rows sorted by (partition, offset); None while it does not exist."""
    if not (data_dir / "iceberg" / "catalog.db").exists():  # the broker makes it
        return None
    try:
        table = catalog(data_dir).load_table(("seglog", topic))
    except (NoSuchTableError, OperationalError):  # the broker is creating the catalog
        return None
    return table.scan().to_arrow().sort_by([("partition", "ascending"), ("offset", "ascending")])


def count(data_dir: Path, topic: str) -> int:
    """Rows in the table (0 while it does not exist)."""
    table = rows(data_dir, topic)
    return 0 if table is None else table.num_rows


def summary(data_dir: Path, topic: str) -> dict[str, Any]:
    """The current snapshot's summary properties."""
    table = catalog(data_dir).load_table(("seglog", topic))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary is not None
    return dict(snapshot.summary.additional_properties)


def rows_by(data_dir: Path, topic: str, meta: str) -> list[dict[str, Any]] | None:
    """A ``value_schema`` table's rows as dicts, by ``<meta>.offset`` (None while the table
    does not exist)."""
    if not (data_dir / "iceberg" / "catalog.db").exists():
        return None
    try:
        table = catalog(data_dir).load_table(("seglog", topic))
    except (NoSuchTableError, OperationalError):  # the broker is creating the catalog
        return None
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r[meta]["offset"])


def dlq_rows(data_dir: Path, topic: str) -> list[dict[str, Any]]:
    """The dead-letter table's rows by offset ([] while it does not exist)."""
    try:
        table = catalog(data_dir).load_table(("seglog", f"{topic}~dlq"))
    except NoSuchTableError:
        return []
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["offset"])
