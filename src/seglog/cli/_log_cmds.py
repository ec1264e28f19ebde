"""``seglog check DIR``, ``seglog recover DIR``, ``seglog stat DIR``: storage tools.

DIR is one partition directory or a data directory of ``<topic>-<partition>`` ones.
``check`` changes nothing and exits 1 when any data problem is found (2 when DIR is
missing); ``recover`` keeps the longest valid prefix of each log (refused while a writer
holds the data directory's lock); ``stat`` prints segments, bytes and offsets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from seglog.errors import StorageError
from seglog.storage import CheckReport, check, recover, stat

__all__ = ["register"]

_DirArg = Annotated[Path, typer.Argument(help="partition directory or data directory")]


def _report_table(title: str, reports: list[CheckReport]) -> Table:
    table = Table(title=title)
    for col in ("log", "segments", "bytes", "valid bytes", "start", "end", "status"):
        table.add_column(col, justify="left" if col in ("log", "status") else "right")
    for r in reports:
        if r.problems:
            status = (
                "[red]" + ("torn tail: " if r.torn_tail else "CORRUPT: ") + "; ".join(r.problems)
            )
        else:
            status = "[green]ok"
        if r.index_problems:
            status += f" [yellow](index rebuilt/needed: {len(r.index_problems)} segments)"
        if r.removed_segments or r.truncated_bytes:
            status += (
                f" [yellow](cut {r.truncated_bytes} bytes, "
                f"removed {len(r.removed_segments)} segments)"
            )
        table.add_row(
            r.directory.name,
            str(r.segments),
            str(r.bytes),
            str(r.valid_bytes),
            str(r.log_start_offset),
            str(r.log_end_offset),
            status,
        )
    return table


def check_cmd(directory: _DirArg) -> None:
    """Verify every record batch (length, magic, CRC-32C) and index; change nothing."""
    console = Console()
    try:
        reports = check(directory)
    except StorageError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    console.print(_report_table(f"check {directory}", reports))
    if any(not r.ok for r in reports):
        raise typer.Exit(1)


def recover_cmd(directory: _DirArg) -> None:
    """Keep the longest valid prefix of each log and rebuild its indexes."""
    console = Console()
    try:
        reports = recover(directory)
    except StorageError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    console.print(_report_table(f"recover {directory}", reports))


def stat_cmd(directory: _DirArg) -> None:
    """Segments, bytes and offsets of each log (read-only, safe beside a broker)."""
    console = Console()
    try:
        rows = stat(directory)
    except StorageError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    table = Table(title=f"stat {directory}")
    cols = ("log", "segments", "bytes", "log start", "log end", "high watermark")
    for col in cols:
        table.add_column(col, justify="left" if col == "log" else "right")
    for row in rows:
        table.add_row(
            Path(str(row["directory"])).name,
            *(
                str(row[k])
                for k in (
                    "segments",
                    "bytes",
                    "log_start_offset",
                    "log_end_offset",
                    "high_watermark",
                )
            ),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``check``, ``recover`` and ``stat`` to ``app``."""
    app.command("check")(check_cmd)
    app.command("recover")(recover_cmd)
    app.command("stat")(stat_cmd)
