"""``seglog mirror``: build or repair a data directory's columnar topic mirrors offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._errors import storage_errors_exit_2

__all__ = ["register"]


def mirror_cmd(
    data_dir: Annotated[Path, typer.Argument(help="data directory (a broker's --data-dir)")],
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic",
            help="Only this topic, whatever its config (default: every topic with "
            "seglog.parquet.mirror=true).",
        ),
    ] = None,
) -> None:
    """Write a Parquet mirror of every closed segment that lacks one, delete mirrors of
    segments retention removed or the cleaner rewrote. Opens the directory read-only:
    safe beside a running broker. Exit 2 on a storage error (unknown topic...)."""
    try:
        from seglog.columnar import sync_mirrors  # noqa: PLC0415 - needs pyarrow
    except ImportError as exc:
        raise typer.BadParameter(
            f"mirrors need pyarrow: pip install 'seglog[spark]' ({exc})"
        ) from None
    console = Console()
    with storage_errors_exit_2():
        report = sync_mirrors(data_dir, topic)
    table = Table(title=f"mirrors of {data_dir}")
    for column in ("written", "stale removed", "up to date"):
        table.add_column(column, justify="right")
    table.add_row(str(len(report.built)), str(len(report.removed)), str(report.kept))
    console.print(table)
    for path in report.built:
        console.print(f"  wrote {path.parent.name}/{path.name}")


def register(app: typer.Typer) -> None:
    """Add ``mirror`` to ``app``."""
    app.command("mirror")(mirror_cmd)
