"""Loading a partition directory's segments: trust, rescan, or truncate (recovery).

Rules (Kafka's log recovery, with seglog's choice about corruption before the tail):

- After a clean shutdown (``.clean_shutdown`` present) every segment is trusted: its
  index files are loaded and only the bytes after the last offset index entry are walked
  (headers, no CRC). Without the marker, segments below the ``recovery-point`` (fully
  fsynced when rolled) are trusted the same way; the others are scanned batch by batch
  (length, magic, CRC-32C) and their indexes rebuilt. A trusted segment whose index files
  are missing or disagree with the data is rescanned the same way.
- Invalid bytes in the last non-empty segment are a torn tail: a writer (``recover=True``)
  truncates there and removes the empty segments after it; ``recover=False`` raises
  LogCorruptedError; a read-only open stops there without touching anything.
- Invalid bytes before that (a corrupt middle) raise LogCorruptedError, unless
  ``mode="prefix"`` (``storage.recover``): keep the longest valid prefix, delete the rest.
- A scanned segment whose data ends before the next segment's base offset, when that next
  segment and all later ones are empty, lost its last writes: a newer segment's name
  reached the disk before them (any directory fsync can carry it, e.g. the recovery
  point's). The log ends where the data does, as after a torn tail (a writer removes the
  empty segments after it; "strict" raises; read-only stops there): never a hole of
  offsets that reads return nothing for. Segments the cleaner rewrote may end before the
  next base (``allow_gaps``): they are left as they are.
"""

from __future__ import annotations

import os
import pathlib
from typing import Literal

from seglog.errors import LogCorruptedError
from seglog.storage.config import LogConfig
from seglog.storage.fileio import files
from seglog.storage.segment import checkpoints, swap
from seglog.storage.segment.segment import Segment

__all__ = ["LoadReport", "load_segments", "read_recovery_point"]

Mode = Literal["open", "strict", "prefix", "read_only"]


class LoadReport:
    """What loading found: per-problem messages and what was changed."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.truncated_bytes = 0
        self.removed_segments: list[int] = []
        self.rebuilt_indexes: list[int] = []
        self.index_problems: list[int] = []
        self.corrupt_segment: int | None = None
        self.torn_tail = False
        self.lost_bytes = 0
        self.interrupted: list[str] = []
        """Interrupted retention / cleaner swaps finished (``swap.finish_interrupted``)."""


def read_recovery_point(directory: pathlib.Path) -> int:
    """Base offset below which segments were fully fsynced (0 if unknown)."""
    try:
        return int((directory / files.RECOVERY_POINT).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def load_segments(
    directory: pathlib.Path,
    config: LogConfig,
    mode: Mode,
    report: LoadReport | None = None,
    *,
    full_scan: bool = False,
) -> list[Segment]:
    """Open every segment of ``directory`` following the module's rules.

    ``mode``: "open" (writer, truncate a torn tail), "strict" (writer, raise on a torn
    tail), "prefix" (writer, keep the longest valid prefix), "read_only" (change nothing).
    ``full_scan``: CRC-check every segment, trusting no marker (check, recover).
    Raises LogCorruptedError. Returns the segments in offset order (maybe empty).
    """
    report = report if report is not None else LoadReport()
    read_only = mode == "read_only"
    if not read_only:  # a crash during retention or a cleaner swap: see swap.py
        report.interrupted.extend(swap.finish_interrupted(directory))
    cleaned_end = checkpoints.read_cleaner_checkpoint(directory)
    clean = not full_scan and (directory / files.CLEAN_SHUTDOWN).exists()
    rp = 0 if full_scan else read_recovery_point(directory)
    bases = files.list_segment_bases(directory)
    sizes = [os.stat(files.log_path(directory, b)).st_size for b in bases]
    interval, max_bytes = config.index_interval_bytes, (1 << 31) - 1
    segments: list[Segment] = []
    prev_scanned = False  # the segment before this one was scanned (not trusted)
    try:
        for i, base in enumerate(bases):
            seg = Segment(directory, base, read_only=read_only)
            seg.allow_gaps = base < cleaned_end  # rewritten by the cleaner: gaps are legal
            segments.append(seg)
            trusted = clean or (base < rp and i + 1 < len(bases))
            if trusted and seg.load_trusted(interval, max_bytes):
                prev_ok = i == 0 or segments[i - 1].next_offset <= base
                if prev_ok:
                    prev_scanned = False
                    continue
            result = seg.scan(interval, verify_crc=True, max_bytes=max_bytes)
            later_data = any(s > 0 for s in sizes[i + 1 :])
            prev = segments[i - 1] if i else None
            # the scanned segment before ends short of this empty one, nothing after: it
            # lost its last writes (module doc); offsets [prev end, base) never existed
            lost = (
                prev is not None
                and prev_scanned
                and not prev.allow_gaps
                and prev.next_offset < base
                and not any(sizes[i:])
            )
            prev_scanned = True
            bad = result.reason or lost or (prev is not None and prev.next_offset > base)
            if not bad:
                if not seg.indexes_match_files():
                    report.index_problems.append(base)
                    if not read_only:
                        seg.write_indexes()
                        report.rebuilt_indexes.append(base)
                continue
            if lost:
                why = f"offsets {segments[i - 1].next_offset}-{base - 1} lost before it"
            else:
                why = result.reason or f"overlaps the previous segment (base {base})"
            report.problems.append(f"segment {base:020d}: {why}")
            report.corrupt_segment = base
            report.torn_tail = not later_data
            report.lost_bytes = result.file_size - result.valid_size + sum(sizes[i + 1 :])
            if read_only:
                if lost:  # the log ends with the segment before it
                    segments.pop().close()
                break
            if later_data and mode != "prefix":
                raise LogCorruptedError(
                    f"{seg.path}: {why}, before the end of the log; "
                    "run `seglog recover` (storage.recover) to keep the valid prefix"
                )
            if mode == "strict":
                raise LogCorruptedError(f"{seg.path}: torn tail ({why})")
            keep_segment = not lost and (
                i == 0
                or result.valid_size > 0
                or not result.reason
                # after a compacted segment: keep the (empty) file so its base offset
                # stays the log end offset and no offset is ever assigned twice
                or segments[i - 1].next_offset < base
            )
            if keep_segment:
                report.truncated_bytes += result.file_size - result.valid_size
                seg.truncate(result.valid_size)
                seg.write_indexes()
                report.rebuilt_indexes.append(base)
            for later in bases[i + 1 :] if keep_segment else bases[i:]:
                _remove_segment(directory, later)
                report.removed_segments.append(later)
            if not keep_segment:
                segments.pop().close()
            files.remove_if_exists(directory / files.RECOVERY_POINT)  # may be past the end
            files.fsync_dir(directory)
            break
    except BaseException:
        for seg in segments:
            seg.close()
        raise
    return segments


def _remove_segment(directory: pathlib.Path, base: int) -> None:
    for path in (
        files.log_path(directory, base),
        files.index_path(directory, base),
        files.timeindex_path(directory, base),
        files.txnindex_path(directory, base),
    ):
        files.remove_if_exists(path)
