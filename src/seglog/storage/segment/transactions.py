"""A partition's transaction state: ongoing transactions, aborted-transaction indexes, and
their recovery (Kafka's ProducerStateManager, the part a partition's readers need).

A transactional batch (attribute bit 4) of producer P starts P's ongoing transaction on
the partition (its first offset kept) or extends it; a control batch of P (bit 5, see
``record/control.py``) ends it; an ABORT marker adds an ``AbortedTxn`` to the
``.txnindex`` of the segment holding the marker (``index/txn_index.py``). The last stable
offset (LSO) is the first offset of the oldest ongoing transaction, else the high
watermark.

Recovery: ``transaction-state`` (JSON ``{"offset": N, "ongoing": [[pid, first], ...]}``,
written with the atomic-write helper at each roll and at close) is the state of the
offsets below N. Opening replays the batch headers from N to the log end (nothing after a
clean close, the active segment after a crash), first dropping ``.txnindex`` entries whose
markers are at or after N. Without a usable snapshot (missing, past the recovered end, or
an interrupted cleaner swap) the whole log is replayed once and every ``.txnindex``
rewritten.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import struct
from collections.abc import Sequence

from seglog.errors import CorruptRecordError
from seglog.storage.fileio import files
from seglog.storage.index.txn_index import AbortedTxn
from seglog.storage.record.batch import HEADER_SIZE, LOG_OVERHEAD
from seglog.storage.record.control import ATTR_CONTROL, ATTR_TRANSACTIONAL, control_marker
from seglog.storage.segment.segment import Segment

__all__ = [
    "TXN_SNAPSHOT",
    "Transactions",
    "read_snapshot",
    "recover_transactions",
    "snapshot_bytes",
    "write_snapshot",
]

TXN_SNAPSHOT = "transaction-state"
"""The transaction snapshot beside the segments (see the module docstring)."""

_logger = logging.getLogger(__name__)
# baseOffset, batchLength, (epoch, magic, crc), attributes, lastOffsetDelta, ..., producerId
_FIELDS = struct.Struct(">qi9xhi16xq")
_CHUNK = 1 << 20


class Transactions:
    """The ongoing transactions of one partition (under the log's write lock)."""

    def __init__(self, ongoing: dict[int, int] | None = None) -> None:
        self.ongoing: dict[int, int] = dict(ongoing or {})
        """Producer id -> first offset of its ongoing transaction. Replaced, never mutated
        (readers take it without a lock)."""

    def first_unstable(self) -> int | None:
        """The first offset of the oldest ongoing transaction, None when there is none."""
        ongoing = self.ongoing
        return min(ongoing.values()) if ongoing else None

    def observe(
        self,
        seg: Segment,
        base: int,
        attributes: int,
        producer_id: int,
        batch: bytes | bytearray | memoryview | None,
    ) -> None:
        """Account for the stored batch at ``base`` (its ``attributes`` and ``producer_id``)
        in segment ``seg``; ``batch``: its bytes (needed for control batches only).
        CorruptRecordError on a control batch without a marker record."""
        if not attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
            return
        if attributes & ATTR_CONTROL:
            assert batch is not None
            marker = control_marker(batch)
            ongoing = dict(self.ongoing)
            first = ongoing.pop(producer_id, base)
            self.ongoing = ongoing
            if marker is not None and not marker[0]:
                others = min(ongoing.values()) if ongoing else base + 1
                seg.txn_index.append(AbortedTxn(producer_id, first, base, min(others, base + 1)))
        elif producer_id not in self.ongoing:
            self.ongoing = {**self.ongoing, producer_id: base}

    def replay(self, segments: Sequence[Segment], start: int) -> int:
        """Replay the batches at or after offset ``start`` of ``segments`` (their headers,
        read 1 MiB at a time; the bytes of control batches); returns the batches seen."""
        seen = 0
        for seg in segments:
            if seg.next_offset <= start:
                continue
            if seg.scanned and not seg.walked_attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
                continue  # the recovery scan saw no transactional or control batch in it
            size = seg.size
            found = seg.find(start, size) if start > seg.base_offset else None
            pos = found[0] if found is not None else 0
            fd = seg.fd
            while size - pos >= HEADER_SIZE:
                chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
                cpos = 0
                while len(chunk) - cpos >= HEADER_SIZE:
                    base, blen, attrs, _, pid = _FIELDS.unpack_from(chunk, cpos)
                    bsize = blen + LOG_OVERHEAD
                    if bsize < HEADER_SIZE:
                        raise CorruptRecordError(f"{seg.path}: bad batch length at {pos + cpos}")
                    if attrs & (ATTR_TRANSACTIONAL | ATTR_CONTROL) and base >= start:
                        data = None
                        if attrs & ATTR_CONTROL:
                            data = chunk[cpos : cpos + bsize]
                            if len(data) < bsize:
                                data = os.pread(fd, bsize, pos + cpos)
                        self.observe(seg, base, attrs, pid, data)
                    seen += 1
                    cpos += bsize
                if cpos == 0:  # a short read (the file shrank meanwhile): nothing more
                    break
                pos += cpos  # past the last batch whose header was read (maybe past chunk)
        return seen


def snapshot_bytes(offset: int, ongoing: dict[int, int]) -> bytes:
    """The contents of ``transaction-state`` for the state of the offsets below ``offset``."""
    body = {"offset": offset, "ongoing": sorted([p, f] for p, f in ongoing.items())}
    return json.dumps(body).encode()


def write_snapshot(directory: pathlib.Path, offset: int, ongoing: dict[int, int]) -> None:
    """Write ``transaction-state``: the state of the offsets below ``offset``. OSError."""
    files.write_small_file(directory / TXN_SNAPSHOT, snapshot_bytes(offset, ongoing))


def read_snapshot(directory: pathlib.Path) -> tuple[int, dict[int, int]] | None:
    """``(offset, ongoing)`` of ``transaction-state``, None when missing or unreadable."""
    try:
        body = json.loads((directory / TXN_SNAPSHOT).read_bytes())
        offset = int(body["offset"])
        ongoing = {int(p): int(f) for p, f in body["ongoing"]}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        _logger.warning("ignoring the transaction snapshot of %s: %s", directory, e)
        return None
    return offset, ongoing


def recover_transactions(
    directory: pathlib.Path, segments: Sequence[Segment], *, full: bool
) -> Transactions:
    """The transaction state of a loaded log (see the module docstring): from the snapshot
    when usable and not ``full``, else from the first segment. ``.txnindex`` entries at or
    after the replay's start are dropped first (the replay writes them again)."""
    end = segments[-1].next_offset if segments else 0
    full = full or any(seg.txn_index_suspect for seg in segments)
    snap = None if full else read_snapshot(directory)
    if snap is not None and snap[0] > end:
        snap = None  # recovery cut the log below the snapshot
    if snap is None:
        start, txns = (segments[0].base_offset if segments else 0), Transactions()
    else:
        start, txns = snap[0], Transactions(snap[1])
    for seg in segments:
        if seg.next_offset > start or snap is None:
            seg.txn_index.truncate_from(start if snap is not None else -1)
    if start < end:
        txns.replay(segments, start)
    return txns
