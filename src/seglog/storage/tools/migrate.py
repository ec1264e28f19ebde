"""``migrate``: bring every partition directory under a path to this seglog's on-disk
format version, one registered step at a time (``segment.format_version.MIGRATIONS``),
each under the log's writer lock."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable

from seglog.errors import DirectoryNotFoundError, FormatVersionError
from seglog.storage.fileio import files
from seglog.storage.segment.format_version import (
    FORMAT_FILE,
    FORMAT_VERSION,
    MIGRATIONS,
    read_format,
)
from seglog.storage.tools.check import log_directories

__all__ = ["migrate"]


def migrate(
    path: str | os.PathLike[str],
    migrations: dict[int, Callable[[pathlib.Path], None]] | None = None,
) -> list[tuple[pathlib.Path, int, int]]:
    """Bring every partition directory under ``path`` (one partition directory or a data
    directory) to :data:`FORMAT_VERSION`: ``(directory, from version, to version)`` each.
    Takes each log's writer lock (DataDirLockedError while a writer has it open);
    FormatVersionError for a version newer than this seglog or a missing step;
    DirectoryNotFoundError when ``path`` is missing or holds no log. ``migrations``
    defaults to the registry."""
    steps = MIGRATIONS if migrations is None else migrations
    target = max([FORMAT_VERSION, *(v + 1 for v in steps)])
    out = []
    p = pathlib.Path(path)
    if not p.is_dir():
        raise DirectoryNotFoundError(f"no directory {p}")
    for d in log_directories(p):
        lock = files.lock_log_dir(d)
        try:
            start = read_format(d) or 1
            if start > target:
                raise FormatVersionError(f"{d}: format version {start} is newer than {target}")
            version = start
            while version < target:
                step = steps.get(version)
                if step is None:
                    raise FormatVersionError(f"{d}: no migration from format version {version}")
                step(d)
                version += 1
                files.write_small_file(d / FORMAT_FILE, f"{version}\n".encode())
            if read_format(d) is None:
                files.write_small_file(d / FORMAT_FILE, f"{version}\n".encode())
            out.append((d, start, version))
        finally:
            os.close(lock)
    return out
