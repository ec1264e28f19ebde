"""A data directory holding a transactional topic (committed, aborted and one ongoing
transaction, small segments, mirrors on), shared by the columnar and Spark tests of
read_committed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.storage._batches import make_batch, txn_batch

from seglog.storage import DataDir, encode_control_batch

TOPIC = "txns"


@dataclass
class Written:
    """Offsets of what ``fill_transactions`` wrote (one partition)."""

    committed: list[int]
    """Records a read_committed reader sees (below the LSO, not aborted)."""
    records: list[int]
    """Every record (read_uncommitted: aborted ones too, markers never)."""
    lso: int
    end: int


def fill_transactions(path: Path, rounds: int = 12) -> Written:
    """Per round: producer 1 commits 3 records, producer 2 aborts 3, 2 plain records; then
    producer 3 leaves a transaction open, followed by 24 plain records. Segments of ~1 KiB."""
    committed: list[int] = []
    records: list[int] = []
    with DataDir(path) as data_dir:
        data_dir.create_topic(TOPIC, 1, {"segment.bytes": "1024", "seglog.parquet.mirror": "true"})
        log = data_dir.log(TOPIC, 0)

        def marker(pid: int, commit: bool) -> None:
            batch = encode_control_batch(pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=1)
            log.append(batch, origin="coordinator")

        for r in range(rounds):
            base = log.log_end_offset
            log.append(txn_batch(1, 3, tag=b"c%d" % r))  # base..base+2
            log.append(txn_batch(2, 3, tag=b"a%d" % r))  # +3..+5
            log.append(make_batch(2, tag=b"p%d" % r))  # +6..+7
            marker(1, True)  # +8
            marker(2, False)  # +9
            committed += [base, base + 1, base + 2, base + 6, base + 7]
            records += list(range(base, base + 8))
        lso = log.log_end_offset
        log.append(txn_batch(3, 2, tag=b"open"))
        for i in range(12):  # past a roll or two: closed segments beyond the LSO
            log.append(make_batch(2, tag=b"after%d" % i))
        records += list(range(lso, log.log_end_offset))
        log.sync()
        return Written(committed, records, lso, log.log_end_offset)
