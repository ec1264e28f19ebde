"""A log of committed, aborted and plain records over several small segments, shared by the
storage and Spark tests of read_committed over tiered history."""

from __future__ import annotations

from seglog.storage import Log, encode_control_batch

from ._batches import make_batch, txn_batch

PER_SEGMENT = 10
"""``segment_messages`` of the logs written."""


def end_txn(log: Log, pid: int, *, commit: bool) -> int:
    """Append producer ``pid``'s COMMIT or ABORT marker; its offset."""
    marker = encode_control_batch(pid, 0, commit=commit, coordinator_epoch=3, timestamp_ms=1)
    return log.append(marker, origin="coordinator").base_offset


def write_transactions(log: Log) -> tuple[list[int], list[tuple[int, int]]]:
    """Committed, aborted and plain records over about eight segments of ``PER_SEGMENT``
    messages; the last transaction (producer 6) is aborted in the active segment, after
    a roll. Returns (the offsets a read_committed reader sees, the aborted
    transactions)."""
    log.append(txn_batch(1, 3, tag=b"abort"))  # 0-2
    log.append(txn_batch(2, 3, tag=b"commit"))  # 3-5
    log.append(make_batch(1, tag=b"plain"))  # 6
    end_txn(log, 1, commit=False)  # 7
    end_txn(log, 2, commit=True)  # 8
    log.append(txn_batch(3, 2, tag=b"abort"))  # 9-10: aborted in a later segment
    log.append(make_batch(3, tag=b"plain"))  # 11-13
    log.append(txn_batch(4, 2, tag=b"abort"))  # 14-15
    end_txn(log, 4, commit=False)  # 16
    while log.log_end_offset < 2 * PER_SEGMENT + 5:
        log.append(make_batch(2, tag=b"plain"))
    marker3 = end_txn(log, 3, commit=False)
    while log.log_end_offset < 6 * PER_SEGMENT:
        log.append(make_batch(2, tag=b"plain"))
    first6 = log.append(txn_batch(6, 2, tag=b"abort")).base_offset
    rolled = log.segments()[-1].base_offset
    while log.segments()[-1].base_offset == rolled:
        log.append(make_batch(2, tag=b"plain"))
    marker6 = end_txn(log, 6, commit=False)
    log.append(make_batch(2, tag=b"plain"))
    visible = [3, 4, 5, 6, 11, 12, 13, *range(17, marker3), *range(marker3 + 1, first6)]
    visible += [*range(first6 + 2, marker6), marker6 + 1, marker6 + 2]
    return visible, [(1, 0), (3, 9), (4, 14), (6, first6)]
