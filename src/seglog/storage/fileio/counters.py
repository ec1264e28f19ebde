"""File operation counters of one open log (``Log.stats().files``, exported as metrics by
``seglog serve --metrics-listen``): every layer that touches a file reports into one."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["FileCounters"]


@dataclass
class FileCounters:
    """File operations of one open log since it was opened (monotonic). What the open
    itself changed (crash recovery, finishing an interrupted swap) is not counted, but
    for ``truncations``."""

    opens: int = 0
    """Segment ``.log`` files opened: at load, at roll, and reopened after ``gc``."""
    appends: int = 0
    """Successful ``append`` calls (each one or more record batches, one write)."""
    appended_bytes: int = 0
    """Bytes written by those appends."""
    syncs: int = 0
    """fsync rounds of the group commit thread (each may cover many appends)."""
    rolls: int = 0
    """New active segments created."""
    truncations: int = 0
    """Segment files cut back: torn tails at open, retention/cleaner truncations."""
    errors: int = 0
    """Failed writes, rolls and fsyncs (an fsync error takes the log offline)."""
    gc_closes: int = 0
    """Idle segment file handles closed by ``Log.gc``."""
    appended_records: int = 0
    """Records in those appends (sum of the batches' recordCount)."""
    reads: int = 0
    """Reads of record batches: ``read``, ``read_slice`` and consume calls that found data."""
    read_bytes: int = 0
    """Bytes returned by those reads (a ``read_slice`` counts its slice's size)."""
    deletions: int = 0
    """Segment and index files unlinked: by retention and DeleteRecords (the
    ``.deleted`` files), by the cleaner and ``delete_offsets`` (an abandoned rewrite's
    ``.cleaned`` files), by ``adopt`` (the index files of the empty active segment it
    replaces). A file replaced by a rename counts as the rename only."""
    renames: int = 0
    """Segment and index files renamed: to ``.deleted``/``.bak`` (retention), the four
    renames of each cleaner / ``delete_offsets`` swap, ``adopt``'s move of its file into
    the log (and back, when it fails after)."""
    index_writes: int = 0
    """Writes to ``.index``/``.timeindex`` files, ``.cleaned`` ones included: each
    buffered flush, each whole-file rewrite (a rebuild, a truncation, the cleaner's
    and ``delete_offsets``' new indexes, ``adopt``'s)."""

    def as_dict(self) -> dict[str, int]:
        """``{counter name: value}`` (for metrics exporters)."""
        return asdict(self)
