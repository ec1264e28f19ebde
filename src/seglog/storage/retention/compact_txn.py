"""What compaction removes because of transactions (Kafka's log cleaner rules, its
``CleanedTransactionMetadata``):

- the records of aborted transactions (every batch of the producer from the
  transaction's first offset up to its ABORT marker), in cleanable segments;
- a transaction marker (control batch), in a cleanable segment, once no batch of its
  transaction is left in the log (an ABORT marker: none in a segment this pass does not
  clean; a COMMIT marker: none at all, so a later pass, once compaction removed the
  transaction's records, takes it) and its timestamp is ``delete_retention_ms`` old
  (Kafka's delete horizon, counted from the marker's timestamp as for tombstones);
- nothing at or past the last stable offset: ``compact.py`` cleans only segments below it
  (the records of a transaction whose marker is not written yet stay).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from seglog.storage.index.txn_index import AbortedTxn
from seglog.storage.record.control import ATTR_CONTROL, ATTR_TRANSACTIONAL, control_marker
from seglog.storage.retention.rewrite import iter_batches

if TYPE_CHECKING:
    from seglog.storage.segment.segment import Segment

__all__ = ["TxnDrops", "transaction_drops"]

TxnDrops = dict[int, tuple[list[int], list[int]]]
"""id(segment) -> (offsets of aborted records to drop, offsets of markers to drop)."""


def transaction_drops(
    segments: Sequence[Segment],
    cleanable: set[int],
    aborted: list[AbortedTxn],
    marker_before_ms: int,
) -> TxnDrops:
    """Walk the batches of ``segments`` (oldest first, every segment up to the last
    cleanable one, ``cleanable`` their ids) and say what the module's rules remove from
    the cleanable ones. ``aborted``: the log's aborted transactions (``.txnindex``
    entries) overlapping them; ``marker_before_ms``: markers older than this may go."""
    out: TxnDrops = {}
    queue = sorted(aborted, key=lambda a: a.first_offset)
    at = 0
    active: set[int] = set()  # producers inside an aborted transaction
    # producer id -> whether a batch of its current transaction stays after this pass
    retained: dict[int, bool] = {}
    for seg in segments:
        clean = id(seg) in cleanable
        data_drops: list[int] = []
        marker_drops: list[int] = []
        for h, batch in iter_batches(seg):
            while at < len(queue) and queue[at].first_offset <= h.last_offset:
                active.add(queue[at].producer_id)
                at += 1
            pid = h.producer_id
            if h.attributes & ATTR_CONTROL:
                marker = control_marker(batch)
                commit = marker is not None and marker[0]
                if not commit:
                    active.discard(pid)
                kept = retained.pop(pid, False)
                if clean and not kept and h.max_timestamp < marker_before_ms:
                    marker_drops.append(h.base_offset)
            elif h.attributes & ATTR_TRANSACTIONAL:
                if pid in active and clean:
                    data_drops.extend(range(h.base_offset, h.last_offset + 1))
                    retained.setdefault(pid, False)
                else:
                    retained[pid] = True
        if data_drops or marker_drops:
            out[id(seg)] = (data_drops, marker_drops)
    return out
