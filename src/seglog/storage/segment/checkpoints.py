"""The small checkpoint files beside a partition's segments: ``log-start-offset`` (the log
start offset, Kafka's log-start-offset-checkpoint for one partition) and
``cleaner-offset-checkpoint`` (how far the cleaner has rewritten), read at load and by the
tools, written durably with the one atomic-write helper."""

from __future__ import annotations

import pathlib

from seglog.storage.fileio import files

__all__ = ["read_cleaner_checkpoint", "read_log_start_checkpoint", "write_cleaner_checkpoint"]


def _read_int(path: pathlib.Path) -> int:
    try:
        return max(0, int(path.read_text().strip() or 0))
    except (FileNotFoundError, ValueError):
        return 0


def read_log_start_checkpoint(directory: pathlib.Path) -> int:
    """The persisted log start offset of a partition directory (0 when none)."""
    return _read_int(directory / files.LOG_START_OFFSET)


def read_cleaner_checkpoint(directory: pathlib.Path) -> int:
    """End offset of what the cleaner rewrote (0 when never): segments with a base
    offset below it may hold offset gaps."""
    return _read_int(directory / files.CLEANER_CHECKPOINT)


def write_cleaner_checkpoint(directory: pathlib.Path, end_offset: int) -> None:
    """Raise the cleaner checkpoint to ``end_offset`` (never lowers it); durable."""
    if end_offset > read_cleaner_checkpoint(directory):
        files.write_small_file(directory / files.CLEANER_CHECKPOINT, f"{end_offset}\n".encode())
