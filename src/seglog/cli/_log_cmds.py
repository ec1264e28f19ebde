"""``seglog check DIR``, ``seglog recover DIR``, ``seglog stat DIR``: storage tools.

DIR is one partition directory or a data directory of ``<topic>-<partition>`` ones.
``check`` changes nothing and exits 1 when any data problem is found (2 when DIR is
missing); ``recover`` keeps the longest valid prefix of each log (refused while a writer
holds the data directory's lock); ``stat`` prints segments, bytes and offsets.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from seglog.cli._errors import storage_errors_exit_2
from seglog.storage import CheckReport, check, migrate, recover, stat

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
    with storage_errors_exit_2():
        reports = check(directory)
    console.print(_report_table(f"check {directory}", reports))
    if any(not r.ok for r in reports):
        raise typer.Exit(1)


def recover_cmd(directory: _DirArg) -> None:
    """Keep the longest valid prefix of each log and rebuild its indexes."""
    console = Console()
    with storage_errors_exit_2():
        reports = recover(directory)
    console.print(_report_table(f"recover {directory}", reports))


def _time(ms: object) -> str:
    if not isinstance(ms, int) or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def stat_cmd(
    directory: _DirArg,
    segments: Annotated[
        bool, typer.Option("--segments", "-s", help="also one table row per segment")
    ] = False,
) -> None:
    """Segments, messages, bytes, offsets, times and index sizes of each log (read-only,
    safe beside a broker); tiered logs add their local start and remote size."""
    console = Console()
    with storage_errors_exit_2():
        rows = stat(directory)
    table = Table(title=f"stat {directory}")
    cols: tuple[str, ...] = (
        "log",
        "segments",
        "messages",
        "bytes",
        "index bytes",
        "log start",
        "log end",
        "high watermark",
        "first time (UTC)",
        "last time (UTC)",
        "format",
    )
    tiered = any("remote_bytes" in row for row in rows)
    if tiered:  # tiered storage: local columns above, the remote tier's here
        cols = (*cols, "local start", "remote segments", "remote bytes")
    for col in cols:
        left = col == "log" or "time" in col
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "log")
    for row in rows:
        table.add_row(
            Path(str(row["directory"])).name,
            *(
                str(row[k])
                for k in (
                    "segments",
                    "messages",
                    "bytes",
                    "index_bytes",
                    "log_start_offset",
                    "log_end_offset",
                    "high_watermark",
                )
            ),
            _time(row["first_timestamp_ms"]),
            _time(row["last_timestamp_ms"]),
            str(row["format_version"]),
            *(
                str(row.get(k, "-"))
                for k in ("local_log_start_offset", "remote_segments", "remote_bytes")
                if tiered
            ),
        )
    console.print(table)
    if segments:
        seg_table = Table(title="segments")
        for col in ("log", "base offset", "last offset", "messages", "bytes", "index",
                    "timeindex", "first time (UTC)", "max time (UTC)"):  # fmt: skip
            left = col == "log" or "time" in col
            seg_table.add_column(col, justify="left" if left else "right", no_wrap=col == "log")
        for row in rows:
            for seg in row["segment_stats"]:  # type: ignore[attr-defined]
                seg_table.add_row(
                    Path(str(row["directory"])).name,
                    str(seg["base_offset"]),
                    str(seg["next_offset"] - 1),
                    str(seg["messages"]),
                    str(seg["bytes"]),
                    str(seg["index_bytes"]),
                    str(seg["time_index_bytes"]),
                    _time(seg["first_timestamp_ms"]),
                    _time(seg["max_timestamp_ms"]),
                )
        console.print(seg_table)


def migrate_cmd(directory: _DirArg) -> None:
    """Bring each log's on-disk format (``seglog-format``) to this seglog's version."""
    console = Console()
    with storage_errors_exit_2():
        done = migrate(directory)
    for path, old, new in done:
        console.print(f"{path.name}: format {old} -> {new}")


def register(app: typer.Typer) -> None:
    """Add ``check``, ``recover``, ``stat`` and ``migrate`` to ``app``."""
    app.command("check")(check_cmd)
    app.command("recover")(recover_cmd)
    app.command("stat")(stat_cmd)
    app.command("migrate")(migrate_cmd)
