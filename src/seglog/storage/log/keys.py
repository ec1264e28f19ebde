"""The key index of an open log (``seglog.storage.index.key_index`` holds the structure and
its file): loaded or rebuilt from the log's batches at open, kept after retention and the
cleaner, saved at close, and the by-key reads (``consume_by_key``, ``offset_by_key``)."""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import struct
from typing import TYPE_CHECKING

from seglog.errors import InvalidOffsetError, NoIndexError, NotFoundError, StorageError
from seglog.storage.fileio import files
from seglog.storage.index.key_index import KEY_INDEX_FILE, KeyIndex
from seglog.storage.log import isolation, reader
from seglog.storage.record.batch import HEADER_SIZE, check_batch_crcs, parse_header
from seglog.storage.record.columns import decode_columns
from seglog.storage.record.control import AbortedFilter
from seglog.storage.record.message import OFFSET_NEWEST, OFFSET_OLDEST, Message, decode_batches

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.log import Log
    from seglog.storage.log.state import LogState

__all__ = [
    "consume_by_key",
    "drop_key_index_file",
    "forget_removed",
    "load_key_index",
    "rebuild_key_index",
]

_logger = logging.getLogger(__name__)


def _fingerprint(state: LogState, end: int) -> tuple[int, int] | None:
    """(base offset, CRC) of the batch ending at ``end`` (exclusive), None if none.
    Reads the segments directly (also while the log is closing)."""
    if end <= state.log_start_offset:
        return None
    try:
        loc = reader.locate(state, end - 1, end)
        if loc is None:
            return None
        seg, pos, _ = loc
        h = parse_header(os.pread(seg.fd, HEADER_SIZE, pos))
    except (InvalidOffsetError, StorageError, OSError, struct.error):
        return None
    return (h.base_offset, h.crc) if h.next_offset == end else None


def load_key_index(state: LogState, end: int) -> KeyIndex:
    """The key index of ``log`` up to ``end`` (its log end offset at open): from the
    ``key-index`` file when its fingerprint matches the data, plus the batches after it;
    else rebuilt by decoding every batch."""
    path = state.directory / KEY_INDEX_FILE
    loaded = None
    with contextlib.suppress(FileNotFoundError):
        loaded = KeyIndex.from_bytes(path.read_bytes())
    start = OFFSET_OLDEST
    idx = KeyIndex()
    if loaded is not None:
        file_idx, file_end, base, crc = loaded
        if file_end == state.log_start_offset == 0 or (
            file_end <= end and _fingerprint(state, file_end) == (base, crc)
        ):
            idx, start = file_idx, file_end
        else:
            _logger.info("%s: stale key index file, rebuilding from the data", path)
    if start == OFFSET_OLDEST or start < end:
        for batch in reader.batches(state, start, end):
            idx.add(batch)
    return idx


def rebuild_key_index(log: Log) -> KeyIndex:
    """Rebuild the key index of the open ``log`` from its data (after a cleaner or delete
    changed stored batches) and install it; NoIndexError without ``key_index``."""
    state = log._state
    if state.keys is None:
        raise NoIndexError(f"log {state.directory} was opened without key_index")
    with state.lock:
        idx = KeyIndex()
        end = state.log_end_offset
        for batch in reader.batches(state, OFFSET_OLDEST, end):
            idx.add(batch)
        state.keys = idx
    return idx


def drop_key_index_file(directory: pathlib.Path) -> None:
    """Unlink ``<directory>/key-index`` (the cleaner, before it commits a rewrite: the
    file describes the old data and its fingerprint may still match after a crash). The
    caller fsyncs the directory. Written again from memory by the next clean close."""
    files.remove_if_exists(directory / KEY_INDEX_FILE)


def forget_removed(log: Log, removed: list[int], *, rescan: bool) -> None:
    """Fix ``log``'s in-memory key index after the records at ``removed`` were deleted by
    compaction or ``delete_offsets`` (called under the maintenance lock, after the
    rewrite): a key whose last offset was removed points at its latest surviving older
    record, found by decoding the log from the log start up to that offset (``rescan``:
    delete-by-offsets, and compaction when it removed records of aborted transactions),
    or is forgotten (otherwise compaction removes a key's last record, a tombstone, only
    when no earlier record of the key is kept). Appends that happened
    meanwhile win (an entry no longer naming a removed offset is left alone)."""
    state = log._state
    keys = state.keys
    if keys is None or not removed:
        return
    gone = set(removed)
    with state.lock:
        stale = keys.entries_at(gone)
    if not stale:
        return
    found: dict[bytes, int] = {}
    if rescan:
        upper = max(stale.values())
        nxt = state.log_start_offset
        while nxt < upper:
            data = reader.read(state, nxt, 8 << 20, upper=upper)
            if not data:
                break
            # after the rewrite committed: a CRC error here must not fail the delete
            cols = decode_columns(data, start=nxt, end=upper, check_crcs=False)
            for off, key in zip(cols.offsets.tolist(), cols.keys(), strict=True):
                if key is not None and off < stale.get(key, -1):
                    found[key] = off
            if cols.next_offset <= nxt:
                break
            nxt = cols.next_offset
    with state.lock:
        keys.repoint(stale, found)


def save_key_index(directory: pathlib.Path, keys: KeyIndex, state: LogState, end: int) -> None:
    """Persist ``keys`` (covering offsets below ``end``) atomically (writer at close)."""
    fp = _fingerprint(state, end) or (0, 0)
    files.write_small_file(directory / KEY_INDEX_FILE, keys.to_bytes(end, *fp))


def consume_by_key(
    state: LogState,
    key: bytes,
    offset: int,
    max_count: int,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> tuple[int, list[Message]]:
    """See ``Log.consume_by_key``."""
    keys = state.keys
    if keys is None:
        raise NoIndexError(f"log {state.directory} was opened without key_index")
    committed = isolation.check_level(isolation_level)
    end = state.last_stable_offset if committed else state.high_watermark
    if offset == OFFSET_NEWEST:
        return end, []
    if offset == OFFSET_OLDEST:
        offset = state.log_start_offset
    last = keys.get(key)
    if last is None or last < offset:
        offset, _ = reader.resolve_read(state, offset, None)  # InvalidOffsetError as ``read``
        return max(offset, end), []
    out: list[Message] = []
    check = state.config.check_crcs
    skip = AbortedFilter(reader.aborted_transactions(state, offset, end)) if committed else None
    for batch in reader.batches(state, offset, end):
        if skip is not None:
            h = parse_header(batch)
            if skip.skip(batch, 0, h.attributes, h.last_offset, h.producer_id):
                continue
        if check:
            check_batch_crcs(batch)  # CorruptRecordError naming the batch's offset
        for m in decode_batches(batch):
            if m.offset < offset or m.key != key:
                continue
            out.append(m)
            if len(out) >= max_count:
                return m.offset + 1, out
            if m.offset >= last:
                return max(end, m.offset + 1), out
    return max(offset, end), out


def get_offset(state: LogState, key: bytes) -> int:
    """Offset of the last visible record with ``key`` (see ``Log.offset_by_key``)."""
    keys = state.keys
    if keys is None:
        raise NoIndexError(f"log {state.directory} was opened without key_index")
    offset = keys.get(key)
    if offset is None:
        raise NotFoundError(f"no message with key {key!r}")
    if offset < state.log_start_offset:
        raise NotFoundError(f"the last message with key {key!r} was removed by retention")
    return offset
