"""The aborted-transaction index of one segment: ``%020d.txnindex`` (Kafka's TransactionIndex).

One entry per transaction aborted by an ABORT marker stored in the segment, in marker
order; 34 bytes each, big-endian (Kafka's ``AbortedTxn``)::

    offset  size  field
    0       2     version           i16  0
    2       8     producerId        i64
    10      8     firstOffset       i64  the transaction's first offset on this partition
    18      8     lastOffset        i64  the offset of the ABORT marker
    26      8     lastStableOffset  i64  the partition's LSO once the marker was written

Derived data, like the offset and time indexes: recovery rebuilds it from the segment's
batches. The file exists only once the segment holds an ABORT marker. Not thread-safe:
the log's write lock guards changes; readers take ``entries`` (a list replaced, never
mutated).
"""

from __future__ import annotations

import os
import pathlib
import struct
from typing import NamedTuple

from seglog.errors import CorruptRecordError

__all__ = ["ENTRY_SIZE", "AbortedTxn", "TxnIndex", "encode_entry", "parse_entries"]

ENTRY_SIZE = 34
"""Bytes of one AbortedTxn entry."""
_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    """One aborted transaction (Kafka's ``AbortedTxn``)."""

    producer_id: int
    """The producer whose transaction was aborted."""
    first_offset: int
    """First offset the transaction wrote on this partition."""
    last_offset: int
    """Offset of the ABORT marker."""
    last_stable_offset: int
    """The partition's last stable offset right after the marker."""


def encode_entry(txn: AbortedTxn) -> bytes:
    """The 34 bytes of ``txn`` (version 0)."""
    return _ENTRY.pack(0, *txn)


def parse_entries(data: bytes) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes. CorruptRecordError when the size is
    not a multiple of 34, a version is not 0, or an entry's offsets are out of order
    (first > last, LSO > last + 1, or markers not ascending)."""
    if len(data) % ENTRY_SIZE:
        raise CorruptRecordError(f"txnindex of {len(data)} bytes: not a multiple of 34")
    out: list[AbortedTxn] = []
    prev = -1
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
        if version != 0:
            raise CorruptRecordError(f"txnindex entry version {version}")
        if not (0 <= first <= last and 0 <= lso <= last + 1) or last <= prev:
            raise CorruptRecordError(
                f"txnindex entry (producer {pid}, {first}, {last}, {lso}) out of order"
            )
        prev = last
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TxnIndex:
    """The ``.txnindex`` of one segment: ``entries`` in memory, the file written through."""

    def __init__(
        self,
        path: pathlib.Path,
        entries: list[AbortedTxn] | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.read_only = read_only
        """Keep changes in memory only (a read-only log never writes)."""
        self.entries: list[AbortedTxn] = entries or []
        """Aborted transactions whose marker is in the segment, marker order."""

    @classmethod
    def load(cls, path: pathlib.Path, *, read_only: bool = False) -> TxnIndex:
        """The index in ``path`` (empty when the file is missing). CorruptRecordError as
        ``parse_entries``."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        return cls(path, parse_entries(data), read_only=read_only)

    def append(self, txn: AbortedTxn) -> None:
        """Add ``txn`` (its marker after every entry's) to the entries and the file."""
        if self.read_only:
            self.entries = [*self.entries, txn]
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, encode_entry(txn))
        finally:
            os.close(fd)
        self.entries = [*self.entries, txn]

    def truncate_from(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (a truncated log)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries) or (not keep and self.path.exists()):
            self.rewrite(keep)

    def rewrite(self, entries: list[AbortedTxn]) -> None:
        """Replace the file with ``entries`` (removed when empty)."""
        self.entries = list(entries)
        if self.read_only:
            return
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        data = b"".join(encode_entry(e) for e in entries)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def sync(self) -> None:
        """fsync the file, if any."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
