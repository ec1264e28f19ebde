"""``seglog trim DIR`` and ``seglog compact DIR``: retention and compaction of logs at
rest (the broker runs the same functions in the background; a running broker holds the
logs' locks, so these refuse with exit code 2 while it runs).

DIR is one partition directory or a data directory of ``<topic>-<partition>`` ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._errors import storage_errors_exit_2
from seglog.storage import (
    DEFAULT_DELETE_RETENTION_MS,
    Log,
    TrimResult,
    compact,
    log_directories,
    trim_by_age,
    trim_by_count,
    trim_by_offset,
    trim_by_size,
)

__all__ = ["register"]

_DirArg = Annotated[Path, typer.Argument(help="partition directory or data directory")]


def trim_cmd(  # noqa: PLR0917 (typer maps each parameter to a CLI option)
    directory: _DirArg,
    before_offset: Annotated[
        int | None,
        typer.Option("--before-offset", min=0, help="Delete the records before this offset."),
    ] = None,
    max_age_ms: Annotated[
        int | None,
        typer.Option("--max-age-ms", min=0, help="Remove segments whose newest record is older."),
    ] = None,
    max_bytes: Annotated[
        int | None,
        typer.Option("--max-bytes", min=0, help="Remove the oldest segments above this size."),
    ] = None,
    max_messages: Annotated[
        int | None,
        typer.Option("--max-messages", min=0, help="Keep at most this many records."),
    ] = None,
    archive_command: Annotated[
        str | None,
        typer.Option(
            "--archive-command",
            help="Run as 'COMMAND TOPIC PARTITION FILE...' with each removed segment's "
            "files renamed to .bak (it owns them).",
        ),
    ] = None,
) -> None:
    """Trim each log: records before an offset, segments older than an age, oldest
    segments over a size, records over a count. Never the active segment."""
    if before_offset is None and max_age_ms is None and max_bytes is None and max_messages is None:
        raise typer.BadParameter(
            "give --before-offset, --max-age-ms, --max-bytes or --max-messages"
        )
    console = Console()
    table = Table(title=f"trim {directory}")
    for col in ("log", "segments removed", "bytes freed", "log start", "log end"):
        table.add_column(col, justify="left" if col == "log" else "right")
    with storage_errors_exit_2():
        for d in log_directories(directory):
            with Log.open(d) as log:
                removed: list[int] = []
                freed = 0
                steps: list[Callable[[], TrimResult]] = []
                if before_offset is not None:
                    steps.append(
                        lambda: trim_by_offset(log, before_offset, archive=archive_command)
                    )
                if max_age_ms is not None:
                    steps.append(lambda: trim_by_age(log, max_age_ms, archive=archive_command))
                if max_bytes is not None:
                    steps.append(lambda: trim_by_size(log, max_bytes, archive=archive_command))
                if max_messages is not None:
                    steps.append(lambda: trim_by_count(log, max_messages, archive=archive_command))
                for step in steps:
                    res = step()
                    removed.extend(res.segments)
                    freed += res.bytes_freed
                table.add_row(
                    d.name,
                    str(len(removed)),
                    str(freed),
                    str(log.log_start_offset),
                    str(log.log_end_offset),
                )
    console.print(table)


def compact_cmd(
    directory: _DirArg,
    delete_retention_ms: Annotated[
        int,
        typer.Option("--delete-retention-ms", min=0, help="Keep tombstones this long (ms)."),
    ] = DEFAULT_DELETE_RETENTION_MS,
    min_compaction_lag_ms: Annotated[
        int,
        typer.Option("--min-compaction-lag-ms", min=0, help="Leave younger segments (ms)."),
    ] = 0,
) -> None:
    """Compact each log: keep the last record per key, drop old tombstones (Kafka's
    cleaner; offsets are kept, the active segment untouched)."""
    console = Console()
    table = Table(title=f"compact {directory}")
    for col in ("log", "records removed", "bytes freed"):
        table.add_column(col, justify="left" if col == "log" else "right")
    with storage_errors_exit_2():
        for d in log_directories(directory):
            with Log.open(d) as log:
                res = compact(
                    log,
                    delete_retention_ms=delete_retention_ms,
                    min_compaction_lag_ms=min_compaction_lag_ms,
                )
                table.add_row(d.name, str(len(res.offsets)), str(res.bytes_freed))
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``trim`` and ``compact`` to ``app``."""
    app.command("trim")(trim_cmd)
    app.command("compact")(compact_cmd)
