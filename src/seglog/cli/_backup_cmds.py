"""``seglog backup SRC DEST``, ``seglog snapshot SRC FILE|-``, ``seglog restore FILE|- DEST``.

SRC is a partition directory or a data directory; it may be in use by a running broker
(partitions are read through read-only opens: each a consistent prefix up to its high
watermark). Progress bars go to stderr, so ``seglog snapshot DIR -`` can stream the tar to
stdout. Exit code 2 on any error, with nothing left under DEST (see
``seglog.storage.backup`` / ``snapshot`` / ``restore``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from seglog.storage import backup, restore, snapshot

__all__ = ["register"]

_err = Console(stderr=True)


@contextmanager
def _bar(title: str) -> Iterator[Callable[[int, int], None]]:
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=_err,
        transient=False,
    ) as progress:
        task = progress.add_task(title, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total or None)

        yield update


def _fail(e: BaseException) -> typer.Exit:
    _err.print(f"[red]error:[/red] {e}")
    return typer.Exit(2)


def backup_cmd(
    src: Annotated[Path, typer.Argument(help="partition or data directory")],
    dest: Annotated[Path, typer.Argument(help="new directory to create")],
) -> None:
    """Online, consistent backup to a new directory (hard links where possible)."""
    try:
        with _bar("backup") as update:
            report = backup(src, dest, progress=update)
    except Exception as e:
        raise _fail(e) from e
    _err.print(
        f"backed up {report.files} files, {report.bytes} bytes "
        f"({report.linked_bytes} hard-linked) to {dest}"
    )


def snapshot_cmd(
    src: Annotated[Path, typer.Argument(help="partition or data directory")],
    out: Annotated[str, typer.Argument(help="snapshot file (tar), or - for stdout")],
) -> None:
    """Consistent snapshot to one tar stream with a manifest of CRC-32Cs."""
    try:
        with _bar("snapshot") as update:
            if out == "-":
                report = snapshot(src, sys.stdout.buffer, progress=update)
                sys.stdout.buffer.flush()
            else:
                report = snapshot(src, Path(out), progress=update)
    except Exception as e:
        raise _fail(e) from e
    _err.print(f"snapshot of {report.files} files, {report.bytes} bytes written to {out}")


def restore_cmd(
    src: Annotated[str, typer.Argument(help="snapshot file, or - for stdin")],
    dest: Annotated[Path, typer.Argument(help="new directory to create")],
) -> None:
    """Restore a snapshot into a new directory, verifying every CRC-32C first."""
    try:
        with _bar("restore") as update:
            stream = sys.stdin.buffer if src == "-" else Path(src)
            report = restore(stream, dest, progress=update)
    except Exception as e:
        raise _fail(e) from e
    _err.print(f"restored {report.files} files, {report.bytes} bytes into {dest}")


def register(app: typer.Typer) -> None:
    """Add ``backup``, ``snapshot`` and ``restore`` to ``app``."""
    app.command("backup")(backup_cmd)
    app.command("snapshot")(snapshot_cmd)
    app.command("restore")(restore_cmd)
