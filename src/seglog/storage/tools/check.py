"""``check(dir)``: report, change nothing; ``recover(dir)``: keep the longest valid prefix;
``stat(dir)``: segments, bytes and offsets. Each takes one partition directory or a data
directory of ``<topic>-<partition>`` partitions (klevdb's Check/Recover, Kafka's layout).
"""

from __future__ import annotations

import fcntl
import os
import pathlib
from dataclasses import asdict, dataclass, field

from seglog.errors import (
    CorruptRecordError,
    DataDirLockedError,
    DirectoryNotFoundError,
    StorageError,
)
from seglog.storage.config import LogConfig
from seglog.storage.fileio import files
from seglog.storage.log.log import Log
from seglog.storage.segment import checkpoints
from seglog.storage.segment.format_version import check_format, ensure_format
from seglog.storage.segment.recovery import LoadReport, load_segments
from seglog.storage.segment.segment import Segment
from seglog.storage.segment.transactions import recover_transactions

__all__ = ["CheckReport", "check", "log_directories", "recover", "stat"]


@dataclass
class CheckReport:
    """What ``check`` (or ``recover``) found in one partition directory."""

    directory: pathlib.Path
    """The partition directory."""
    segments: int = 0
    """Number of ``.log`` segments."""
    bytes: int = 0
    """Bytes in the ``.log`` files."""
    valid_bytes: int = 0
    """Bytes of whole valid batches kept (or that recovery would keep)."""
    log_start_offset: int = 0
    """The log start offset: the first segment's base offset or the ``log-start-offset``
    checkpoint (retention, DeleteRecords) when higher, capped at the log end offset."""
    log_end_offset: int = 0
    """Offset after the last valid batch."""
    problems: list[str] = field(default_factory=list)
    """Data problems (torn tail, CRC failure, bad structure), empty when the data is sound."""
    torn_tail: bool = False
    """The only problem is at the end of the log (crash recovery truncates it on open)."""
    index_problems: list[int] = field(default_factory=list)
    """Base offsets of segments whose index files (``.index``, ``.timeindex``,
    ``.txnindex``) disagree with the data (rebuildable)."""
    removed_segments: list[int] = field(default_factory=list)
    """(recover) base offsets of segments deleted after the valid prefix."""
    truncated_bytes: int = 0
    """(recover) bytes cut from the segment holding the first invalid byte."""
    format_version: int = 1
    """Version in ``seglog-format`` (1 when missing; 0 when unreadable). A version this
    seglog cannot open is listed in ``problems``."""

    @property
    def ok(self) -> bool:
        """True when no data problem was found (index mismatches are repairable)."""
        return not self.problems


def log_directories(path: str | os.PathLike[str]) -> list[pathlib.Path]:
    """``[path]`` if it is a partition directory (holds ``.log`` files), else its
    subdirectories holding ``.log`` files, sorted. DirectoryNotFoundError when ``path``
    is missing or holds no partition directory."""
    p = pathlib.Path(path)
    if not p.is_dir():
        raise DirectoryNotFoundError(f"no directory {p}")
    if files.list_segment_bases(p):
        return [p]
    subs = sorted(
        d
        for d in p.iterdir()
        if d.is_dir() and not d.name.startswith(("__", ".")) and files.list_segment_bases(d)
    )
    if not subs:
        raise DirectoryNotFoundError(f"no partition directory (%020d.log files) in {p}")
    return subs


def _log_start(directory: pathlib.Path, first_base: int, segs: list[Segment]) -> int:
    """The log start offset as a Log computes it: max(first segment's base offset, the
    ``log-start-offset`` checkpoint), capped at the log end offset."""
    end = segs[-1].next_offset if segs else first_base
    return min(max(first_base, checkpoints.read_log_start_checkpoint(directory)), end)


def _check_one(directory: pathlib.Path) -> CheckReport:

    version, format_problems = check_format(directory)
    report = LoadReport()
    report.problems.extend(format_problems)
    segs = load_segments(directory, LogConfig(), "read_only", report, full_scan=True)
    try:
        _check_txn_indexes(directory, segs, report)
        bases = files.list_segment_bases(directory)
        total = sum(os.stat(files.log_path(directory, b)).st_size for b in bases)
        return CheckReport(
            directory=directory,
            segments=len(bases),
            bytes=total,
            valid_bytes=sum(s.size for s in segs),
            log_start_offset=_log_start(directory, bases[0] if bases else 0, segs),
            log_end_offset=segs[-1].next_offset if segs else 0,
            problems=report.problems,
            torn_tail=report.torn_tail,
            index_problems=report.index_problems,
            format_version=version,
        )
    finally:
        for s in segs:
            s.close()


def _check_txn_indexes(directory: pathlib.Path, segs: list[Segment], report: LoadReport) -> None:
    """Compare each segment's ``.txnindex`` with the ABORT markers its data holds (a
    replay of every batch header, in memory): one entry per marker, same producer id and
    marker offset, in order. A file that does not parse (Kafka's 34-byte AbortedTxn
    layout) or disagrees is an index problem (recovery rebuilds it)."""
    stored = {s.base_offset: (s.txn_index_suspect, s.txn_index.entries) for s in segs}
    try:
        recover_transactions(directory, segs, full=True)  # read-only: in memory
    except (CorruptRecordError, StorageError) as e:  # a control batch without its marker
        report.problems.append(f"transactions: {e}")
        return
    for seg in segs:
        suspect, entries = stored[seg.base_offset]
        want = [(e.producer_id, e.last_offset) for e in seg.txn_index.entries]
        have = [(e.producer_id, e.last_offset) for e in entries]
        if (suspect or want != have) and seg.base_offset not in report.index_problems:
            report.index_problems.append(seg.base_offset)


def check(path: str | os.PathLike[str]) -> list[CheckReport]:
    """CRC-check every batch and compare indexes with the data, changing nothing.
    One report per partition directory. Raises DirectoryNotFoundError (no log there)."""
    return [_check_one(d) for d in log_directories(path)]


def _lock_data_dir(directory: pathlib.Path) -> int | None:
    for candidate in (directory, directory.parent):
        lock = candidate / ".lock"
        if lock.exists():
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as e:
                os.close(fd)
                raise DataDirLockedError(f"{candidate} is in use by a running writer") from e
            return fd
    return None


def recover(path: str | os.PathLike[str]) -> list[CheckReport]:
    """Keep the longest valid prefix of each log: truncate at the first invalid byte,
    delete later segments, rebuild every index (``.txnindex`` and the transaction state
    too), then close cleanly. Raises
    DataDirLockedError if a writer holds the data directory, DirectoryNotFoundError (no
    log there)."""
    out = []
    for d in log_directories(path):
        lock_fd = _lock_data_dir(d)
        log_lock = None
        try:
            log_lock = files.lock_log_dir(d)

            ensure_format(d, write=True)  # never "recover" a format this seglog can't read
            report = LoadReport()
            segs = load_segments(d, LogConfig(), "prefix", report, full_scan=True)
            size = sum(s.size for s in segs)
            # every .txnindex rebuilt too (replay_all); close writes the transaction snapshot
            log = Log(d, LogConfig(), segs, read_only=False, replay_all=True) if segs else None
            end = log.log_end_offset if log is not None else 0
            if log is not None:
                log.close()
            out.append(
                CheckReport(
                    directory=d,
                    segments=len(segs),
                    bytes=size,
                    valid_bytes=size,
                    log_start_offset=_log_start(d, segs[0].base_offset if segs else 0, segs),
                    log_end_offset=end,
                    problems=report.problems,
                    torn_tail=report.torn_tail,
                    index_problems=report.index_problems,
                    removed_segments=report.removed_segments,
                    truncated_bytes=report.truncated_bytes,
                )
            )
        finally:
            for fd in (lock_fd, log_lock):
                if fd is not None:
                    os.close(fd)
    return out


def stat(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Per partition directory: ``{"directory", "segments", "bytes", "log_start_offset",
    "log_end_offset", "high_watermark"}`` plus ``"messages", "batches",
    "first_timestamp_ms", "last_timestamp_ms", "index_bytes", "format_version"`` and
    ``"segment_stats"`` (a list of ``SegmentStats`` as dicts); read-only (safe beside a
    running writer)."""

    out: list[dict[str, object]] = []
    for d in log_directories(path):
        with Log.open(d, read_only=True) as log:
            st = log.stats()
            out.append(
                {
                    "directory": str(d),
                    **log.stat(),
                    "messages": st.messages,
                    "batches": st.batches,
                    "first_timestamp_ms": st.first_timestamp_ms,
                    "last_timestamp_ms": st.last_timestamp_ms,
                    "index_bytes": st.index_bytes,
                    "format_version": check_format(d)[0],
                    "segment_stats": [asdict(s) for s in st.segments],
                }
            )
    return out
