"""What every retention function shares: the result, the archive hook, and removing a
prefix of segments crash-safely (the trims themselves: ``trim_age.py``,
``trim_size.py``, ``trim_count.py``, ``trim_offset.py``).

Rules (Kafka's log retention, NATS Streaming's slice limits):

- Only whole segments are removed, oldest first, never the active segment (Kafka rolls
  and then deletes it; seglog leaves it: it goes once a later append rolls it). A trim
  that must cut inside a segment (by count or offset) moves the log start offset there:
  the records below it are unreadable at once and their segment goes when wholly below.
- The new log start offset is persisted first (``log-start-offset``, atomic replace):
  that is the commit point. Then each removed segment's files are renamed to
  ``.deleted`` (``.log`` last) and unlinked, or renamed to ``.bak`` and handed to the
  archive hook. A crash leaves the new log start with some old segments still on disk;
  they are below it (unreadable) and the next trim removes them; ``.deleted`` leftovers
  are unlinked at open.
- Readers below the new log start offset get InvalidOffsetError (Kafka error 1
  OFFSET_OUT_OF_RANGE); ``OFFSET_OLDEST`` means the new log start.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from seglog.storage.log import maint
from seglog.storage.segment import swap

if TYPE_CHECKING:
    from seglog.storage.log.log import Log
    from seglog.storage.segment.segment import Segment

__all__ = [
    "ArchiveHook",
    "TrimResult",
    "below",
    "leftovers",
    "partition_of",
    "remove_prefix",
    "run_archive_hook",
    "segment_time_ms",
    "trim_prefix",
]

_logger = logging.getLogger(__name__)

ArchiveHook = Callable[[str, int, list[pathlib.Path]], None] | str | Sequence[str]
"""Called before a segment is removed by retention (NATS Streaming's slice archive
script). A callable gets ``(topic, partition, [.timeindex.bak, .index.bak, .log.bak])``; a
command (a string split with ``shlex``, or an argv list) runs as
``COMMAND TOPIC PARTITION FILE...``. The hook owns the ``.bak`` files afterwards (seglog
never deletes them); a failing hook is logged and the files stay."""


class TrimResult(NamedTuple):
    """What a trim removed."""

    log_start_offset: int
    """The log start offset afterwards."""
    segments: tuple[int, ...]
    """Base offsets of the segments removed (or archived), oldest first."""
    bytes_freed: int
    """Bytes of the removed segments' files (.log + indexes)."""


def partition_of(directory: pathlib.Path) -> tuple[str, int]:
    """``(topic, partition)`` from a ``<topic>-<partition>`` directory name, else
    ``(directory name, -1)``."""
    topic, sep, part = directory.name.rpartition("-")
    if sep and topic and part.isdigit():
        return topic, int(part)
    return directory.name, -1


def run_archive_hook(
    hook: ArchiveHook, topic: str, partition: int, files: list[pathlib.Path]
) -> None:
    """Hand ``files`` to ``hook``; errors are logged, never raised (the files stay)."""
    try:
        if callable(hook):
            hook(topic, partition, files)
            return
        argv = shlex.split(hook) if isinstance(hook, str) else list(hook)
        done = subprocess.run(
            [*argv, topic, str(partition), *map(os.fspath, files)],
            check=False,
            capture_output=True,
            timeout=600,
        )
        if done.returncode != 0:
            _logger.error(
                "archive command %s failed (exit %d): %s",
                argv,
                done.returncode,
                done.stderr.decode(errors="replace")[-2000:],
            )
    except Exception:
        _logger.exception("archive hook failed for %s", [f.name for f in files])


def remove_prefix(
    log: Log,
    remove: Sequence[Segment],
    new_start: int,
    *,
    archive: ArchiveHook | None = None,
    topic_partition: tuple[str, int] | None = None,
) -> TrimResult:
    """Persist ``new_start`` as the log start offset (step "checkpoint"), then remove
    ``remove`` (a prefix of the closed segments, all wholly below ``new_start``) oldest
    first as the module docstring says. Caller holds ``maint.maintenance_lock(log)``."""
    maint.set_log_start(log, new_start)
    swap.step("checkpoint")
    removed: list[int] = []
    freed = 0
    tp = topic_partition or partition_of(log.directory)
    for seg in remove:
        freed += maint.segment_bytes(seg)
        maint.drop_segments(log, [seg])
        bak = swap.remove_segment_files(
            log.directory,
            seg.base_offset,
            archive=archive is not None,
            counters=log.counters,
        )
        removed.append(seg.base_offset)
        if archive is not None:
            run_archive_hook(archive, tp[0], tp[1], bak)
    maint.close_retired(log)
    return TrimResult(log.log_start_offset, tuple(removed), freed)


def below(log: Log, segments: Sequence[Segment], offset: int) -> int:
    """How many of the leading ``segments`` (a prefix of the log's) cover only offsets
    below ``offset``: a segment covers its base offset up to the next segment's (gaps
    left by the cleaner included)."""
    segs = log.segments()
    n = 0
    while n < len(segments) and segs[n + 1].base_offset <= offset:
        n += 1
    return n


def leftovers(log: Log, segments: Sequence[Segment]) -> int:
    """How many of the leading ``segments`` lie wholly below the log start offset (an
    interrupted earlier trim): they are removed whatever the policy."""
    return below(log, segments, log.log_start_offset)


def segment_time_ms(seg: Segment) -> int:
    """Largest record timestamp of a segment (ms), or its file's mtime when it has none
    (Kafka's rule for segments without timestamps)."""
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    try:
        return os.stat(seg.path).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return time.time_ns() // 1_000_000


def trim_prefix(
    log: Log,
    closed: Sequence[Segment],
    n: int,
    *,
    new_start: int | None = None,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Remove ``closed[:n]`` (``closed`` from ``maint.closed_segments``: a prefix of the
    log's segments) and move the log start to the next segment's base offset, or to
    ``new_start`` when given (higher: inside a later segment). Caller holds the
    maintenance lock."""
    start = log.segments()[n].base_offset if n else log.log_start_offset
    if new_start is not None:
        start = max(start, new_start)
    if n == 0 and start <= log.log_start_offset:
        maint.close_retired(log)
        return TrimResult(log.log_start_offset, (), 0)
    return remove_prefix(log, closed[:n], start, archive=archive)
