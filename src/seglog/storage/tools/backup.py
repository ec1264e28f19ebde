"""Online, consistent backup of a live log or a whole data directory to a new directory.

What a backup holds, per partition (planned under the log's write lock in a few ms, then
copied without it):

- every segment up to the high watermark at that moment (the durable end offset under
  the default policy): closed segments are hard-linked when source and destination share
  a filesystem (the log never rewrites a closed segment in place: the cleaner goes through
  ``.cleaned → .swap`` renames; the link is checked to name the planned inode), else
  copied; the active segment is copied up to the batch boundary at the high watermark;
- offset and time index files written from the log's in-memory entries (exact for the
  bytes copied), a ``recovery-point`` naming the last segment (so the first open CRC-scans
  that one and trusts the others), the small metadata files (``seglog-format``,
  ``partition.metadata``, log start offset checkpoints...). No ``.clean_shutdown``; the
  key index is rebuilt at the first open with ``key_index``.
- the durable subscriptions' state (``subscriptions/<name>.sub``), each journal written
  as one snapshot line, read after the high watermark and capped at it (position at
  most the copied end offset, unacknowledged offsets below it): the copy resumes each
  subscription where its acks stood, never past the data it holds.

A data directory adds its root files (``__topics/*.json``, broker state, committed offsets)
and backs up each partition in turn: every partition is a consistent prefix of itself, not
a cut across partitions taken at one instant.

Crash safety: everything is written under ``<dest parent>/.<dest name>.partial-<hex>``,
fsynced (files, then directories), then renamed to ``dest`` and the parent fsynced. A
crash leaves no ``dest`` (only the hidden partial directory); an error removes it.
"""

from __future__ import annotations

import os
import pathlib

from seglog.storage.log.backup import (
    BackupItem,
    BackupReport,
    Plan,
    Progress,
    fsync_tree,
    partial_dir,
    plan_log,
    small_files,
    write_plan,
)
from seglog.storage.log.log import Log
from seglog.storage.tools.check import log_directories

__all__ = [
    "BackupItem",
    "BackupReport",
    "Progress",
    "backup",
    "fsync_tree",
    "partial_dir",
    "plan",
]


def plan(src: Log | str | os.PathLike[str]) -> Plan:
    """The consistent file set of ``src``: an open Log, a partition directory or a data
    directory (partitions opened read-only: safe beside a writer in any process).
    DirectoryNotFoundError when ``src`` is missing or holds no log."""
    out = Plan()
    try:
        if isinstance(src, Log):
            plan_log(src, "", out)
            return out
        root = pathlib.Path(src)
        dirs = log_directories(root)
        single = dirs == [root]
        if not single:
            out.items.extend(small_files(root, ""))
            topics = root / "__topics"
            if topics.is_dir():
                out.items.extend(small_files(topics, "__topics/"))
        for d in dirs:
            with Log.open(d, read_only=True) as log:
                plan_log(log, "" if single else d.name + "/", out)
    except BaseException:
        out.close()
        raise
    return out


def backup(
    src: Log | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
) -> BackupReport:
    """Online, consistent backup of ``src`` (an open Log, a partition directory or a data
    directory) into the new directory ``dest`` (see the module docstring). Returns a
    :class:`BackupReport`. Raises FileExistsError when ``dest`` exists,
    DirectoryNotFoundError when ``src`` is missing or holds no log (or ``dest``'s parent is
    missing), LogClosedError, StorageError/OSError on I/O errors (nothing is left under
    ``dest`` then)."""
    return write_plan(lambda: plan(src), str(getattr(src, "directory", src)), dest, progress)
