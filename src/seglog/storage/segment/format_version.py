"""Format version of a partition directory, and the migration registry.

Each partition directory holds ``seglog-format``: one line, the decimal version of the
on-disk format (``1``: Kafka's segment layout as described in ``files.py``). Rules at
``Log.open``:

- missing on a directory that exists → version 1 (directories written before the file
  existed); a writer writes the file (atomically: temp, fsync, rename);
- a version above :data:`FORMAT_VERSION` (written by a newer seglog) → FormatVersionError,
  nothing touched;
- a version below it → FormatVersionError telling to run ``seglog.storage.migrate(dir)``
  (``seglog migrate DIR``): migrations may rewrite files, so they never run implicitly;
- unreadable content → FormatVersionError.

:data:`MIGRATIONS` maps version ``v`` to a function bringing a directory from ``v`` to
``v + 1``; ``migrate`` applies them in order under the writer lock, writing the new
version after each step, so a crash mid-way resumes at the step that was interrupted
(each step must be idempotent).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

from seglog.errors import FormatVersionError
from seglog.storage.fileio import files

__all__ = [
    "FORMAT_FILE",
    "FORMAT_VERSION",
    "MIGRATIONS",
    "check_format",
    "ensure_format",
    "read_format",
]

FORMAT_FILE = "seglog-format"
"""Name of the version file in a partition directory."""
FORMAT_VERSION = 1
"""The format this seglog reads and writes."""

MIGRATIONS: dict[int, Callable[[pathlib.Path], None]] = {}
"""version v → function migrating a partition directory from v to v + 1 (none yet)."""


def read_format(directory: pathlib.Path) -> int | None:
    """The version stored in ``directory``, None when the file is missing.
    FormatVersionError when it is not a positive decimal integer."""
    try:
        text = (directory / FORMAT_FILE).read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return None
    stripped = text.strip()
    if not stripped.isdigit() or int(stripped) < 1:
        raise FormatVersionError(
            f"{directory / FORMAT_FILE}: unreadable format version {text[:20]!r}"
        )
    return int(stripped)


def check_format(directory: pathlib.Path) -> tuple[int, list[str]]:
    """``(version, problems)`` without changing anything (``seglog check``): a missing file
    reads as version 1 with no problem; a newer, older or unreadable one is a problem."""
    try:
        version = read_format(directory)
    except FormatVersionError as e:
        return 0, [str(e)]
    if version is None:
        return 1, []
    if version > FORMAT_VERSION:
        return version, [
            f"format version {version} is newer than this seglog's ({FORMAT_VERSION}): "
            "upgrade seglog"
        ]
    if version < FORMAT_VERSION:
        return version, [f"format version {version} needs `seglog migrate` to {FORMAT_VERSION}"]
    return version, []


def ensure_format(directory: pathlib.Path, *, write: bool) -> int:
    """Check the version at open (see the module rules); when ``write`` (a writer holding
    the lock) and the file is missing, write the current version. Returns the version."""
    version = read_format(directory)
    if version is None:
        if write:
            files.write_small_file(directory / FORMAT_FILE, f"{FORMAT_VERSION}\n".encode())
        return FORMAT_VERSION
    if version > FORMAT_VERSION:
        raise FormatVersionError(
            f"{directory}: format version {version} was written by a newer seglog "
            f"(this one reads version {FORMAT_VERSION}); upgrade seglog"
        )
    if version < FORMAT_VERSION:
        raise FormatVersionError(
            f"{directory}: format version {version} is older than {FORMAT_VERSION}; run "
            "`seglog migrate DIR` (seglog.storage.migrate) first"
        )
    return version
