"""One rule for the directory commands: a storage error is one red line and exit code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from seglog.errors import StorageError

__all__ = ["storage_errors_exit_2"]


@contextmanager
def storage_errors_exit_2(console: Console) -> Iterator[None]:
    """Turn a StorageError raised inside into ``error: <message>`` and ``typer.Exit(2)``
    (exit 1 stays for "ran, found corruption"). The line goes to stderr, not to
    ``console`` (the command's stdout, where ``seglog stat DIR > file`` wants the report)."""
    try:
        yield
    except StorageError as e:
        Console(stderr=True).print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(2) from e
