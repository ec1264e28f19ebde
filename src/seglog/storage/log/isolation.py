"""The point reads under an isolation level (``get``, ``get_by_key`` / ``offset_by_key``,
``get_by_time`` / ``offset_by_time``): Kafka's read_committed rule applied to one record.

Under ``read_committed`` a record is readable when it lies below the last stable offset
and is not in an aborted transaction (Kafka's consumer rule, ``AbortedFilter``); control
records (transaction markers) are never readable, whatever the level. Costs:

- ``get``: one batch read and the aborted transactions overlapping its offset (the
  ``.txnindex`` entries in memory), as under read_uncommitted.
- by key: the key index holds only the last offset of each key, whatever its transaction
  became. When that record is readable (below the LSO, not aborted) the answer costs what
  read_uncommitted does. Otherwise the log is decoded backwards from it, in windows of
  ``_FIRST_WINDOW`` offsets doubling each step (read_committed filter applied), until a
  window holds a committed record of the key: cost proportional to the distance back to
  that record (at most twice it), the whole log below the LSO for a key that has none.
- by time: the time index finds the first record at or after the timestamp (as under
  read_uncommitted); when it is at or past the LSO there is none; when it is aborted the
  batches after it are decoded, read_committed, up to the LSO until a record qualifies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage.log import reader
from seglog.storage.record.batch import parse_header
from seglog.storage.record.columns import decode_columns
from seglog.storage.record.control import is_control_batch, is_transactional_batch

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.state import LogState

__all__ = [
    "check_level",
    "committed_offset_by_key",
    "committed_offset_for_time",
    "unreadable",
]

_FIRST_WINDOW = 1024
"""Offsets decoded by the first step of a read_committed by-key fallback scan."""
_CHUNK = 8 << 20
"""Bytes read at a time by the scans."""


def check_level(isolation_level: IsolationLevel) -> bool:
    """Whether ``isolation_level`` is read_committed; ValueError on an unknown level."""
    if isolation_level == "read_committed":
        return True
    if isolation_level != "read_uncommitted":
        raise ValueError(f"isolation_level {isolation_level!r}")
    return False


def unreadable(st: LogState, batch: memoryview, offset: int, committed: bool) -> str | None:
    """Why the record at ``offset`` of ``batch`` (the stored batch holding it) is not
    readable, None when it is: a control record (any level), or under ``committed`` a
    record of an aborted transaction (its producer has an ABORT marker at or after
    ``offset`` closing a transaction that began at or before it, Kafka's ``.txnindex``)."""
    h = parse_header(batch)
    if not h.base_offset <= offset <= h.last_offset:
        return None
    if is_control_batch(h.attributes):
        return "a control record (a transaction marker)"
    if committed and is_transactional_batch(h.attributes):
        pid = h.producer_id
        if any(e.producer_id == pid for e in reader.aborted_entries(st, offset, offset + 1)):
            return "a record of an aborted transaction"
    return None


def _is_readable(st: LogState, offset: int) -> bool:
    """Whether the record at ``offset`` (below the LSO) is committed."""
    try:
        for batch in reader.batches(st, offset, offset + 1):
            return unreadable(st, batch, offset, True) is None
    except InvalidOffsetError:  # retention moved the log start past it meanwhile
        return False
    return False  # not stored (compacted away meanwhile)


def _scan(st: LogState, lo: int, hi: int) -> Iterator[tuple[int, int, bytes | None]]:
    """``(offset, timestamp ms, key)`` of each committed record of ``[lo, hi)`` (``hi``
    at most the LSO), decoded in chunks of up to ``_CHUNK`` bytes with the
    read_committed filter. InvalidOffsetError when ``lo`` is below the log start."""
    entries = reader.aborted_entries(st, lo, hi)
    nxt = lo
    while nxt < hi:
        data = reader.read(st, nxt, _CHUNK, upper=hi)
        if not data:
            break
        aborted = [(e.producer_id, e.first_offset) for e in entries if e.last_offset >= nxt]
        cols = decode_columns(
            data, start=nxt, end=hi, check_crcs=st.config.check_crcs, aborted=aborted
        )
        yield from zip(cols.offsets.tolist(), cols.timestamps.tolist(), cols.keys(), strict=True)
        if cols.next_offset <= nxt:
            break
        nxt = cols.next_offset


def committed_offset_by_key(st: LogState, key: bytes, last: int) -> int:
    """Offset of the last committed record with ``key`` below the LSO, given ``last``
    (the key index's offset of its last record). NotFoundError when there is none."""
    lso = st.last_stable_offset
    if last < lso and _is_readable(st, last):
        return last
    hi, window = min(last, lso), _FIRST_WINDOW
    start = st.log_start_offset
    while hi > start:
        lo = max(start, hi - window)
        hit = None
        try:
            for off, _, k in _scan(st, lo, hi):
                if k == key:
                    hit = off
        except InvalidOffsetError:  # retention moved the log start meanwhile
            break
        if hit is not None:
            return hit
        hi, window = lo, window * 2
    raise NotFoundError(f"no committed message with key {key!r} below the last stable offset")


def committed_offset_for_time(
    st: LogState, timestamp_ms: int, found: tuple[int, int] | None
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first committed record below the LSO whose timestamp
    is >= ``timestamp_ms``, given ``found``: the read_uncommitted answer (the first such
    record below the high watermark, aborted or not). None when there is none."""
    if found is None:
        return None
    offset, lso = found[0], st.last_stable_offset
    if offset >= lso:
        return None
    if _is_readable(st, offset):
        return found
    nxt, window = offset + 1, _FIRST_WINDOW
    while nxt < lso:
        nxt = max(nxt, st.log_start_offset)  # retention may move it meanwhile
        hi = min(lso, nxt + window)
        for off, ts, _ in _scan(st, nxt, hi):
            if ts >= timestamp_ms:
                return off, ts
        nxt, window = hi, window * 2
    return None
