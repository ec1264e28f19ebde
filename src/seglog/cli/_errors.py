"""One rule for the directory commands: a storage error is one red line and exit code 2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from seglog.cli._fail import fail
from seglog.errors import StorageError

__all__ = ["storage_errors_exit_2"]


@contextmanager
def storage_errors_exit_2() -> Iterator[None]:
    """Turn a StorageError raised inside into ``error: <message>`` on stderr (``fail``:
    not on stdout, where ``seglog stat DIR > file`` wants the report) and
    ``typer.Exit(2)`` (exit 1 stays for "ran, found corruption")."""
    try:
        yield
    except StorageError as e:
        raise fail(str(e), 2) from e
