"""Embedded read_committed consume against read_uncommitted on the same log.

One log holds N records (default 500,000 x 100 B) written as Kafka transactions: each
transaction is one transactional record batch of ``--txn-records`` records (default
1,000) from one of 8 producers, ended by its COMMIT marker; every ``--abort-every``-th
(default 10th) transaction is aborted instead (an ABORT marker and a ``.txnindex`` entry).
Both isolation levels then read the whole log, in calls of 10,000 records:
``Log.consume_columns`` (the vectorised path; read_committed adds the aborted-transaction
filter and the LSO bound) and ``Log.consume`` (Message objects). Prints ``seglog.bench``'s
markdown table of records/s (medians of ``--repeat`` runs, reads alternated) and the ratio
read_committed / read_uncommitted measured in the same run (goal: >= 0.9x); ``--json FILE``
writes the report (``Report.to_dict``: rows, every sample, settings).

    .venv/bin/python benchmarks/read_committed_bench.py
    .venv/bin/python benchmarks/read_committed_bench.py --records 20000 --repeat 1
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import crc32c

from seglog.bench import Report, Row, Samples, machine_info
from seglog.storage import (
    OFFSET_OLDEST,
    Log,
    encode_control_batch,
    encode_records,
    open_log,
)

PRODUCERS = 8
GOAL = 0.9
"""read_committed / read_uncommitted this benchmark aims at."""
CALL = 10_000


def _transactional(batch: bytes, producer_id: int) -> bytes:
    """``batch`` (one record batch v2 from ``encode_records``) marked transactional, of
    ``producer_id`` epoch 0, its CRC-32C recomputed."""
    buf = bytearray(batch)
    (attrs,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attrs | 0x10)
    struct.pack_into(">qhi", buf, 43, producer_id, 0, 0)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def fill(log: Log, records: int, txn_records: int, abort_every: int) -> tuple[int, int]:
    """Write the transactions; returns (committed records, aborted records)."""
    value = b"v" * 100
    committed = aborted = 0
    n = 0
    while records - committed - aborted > 0:
        count = min(txn_records, records - committed - aborted)
        pid = 1000 + n % PRODUCERS
        data = encode_records([value] * count, None, 0, None, 1 << 30)
        log.append(_transactional(bytes(data), pid))
        abort = abort_every > 0 and n % abort_every == abort_every - 1
        marker = encode_control_batch(
            pid, 0, commit=not abort, coordinator_epoch=0, timestamp_ms=int(time.time() * 1000)
        )
        log.append(marker, origin="coordinator")
        if abort:
            aborted += count
        else:
            committed += count
        n += 1
    log.sync()
    return committed, aborted


def _read_columns(log: Log, level: Any) -> int:
    offset, total = OFFSET_OLDEST, 0
    while True:
        cols = log.consume_columns(offset, CALL, isolation_level=level)
        if len(cols) == 0:
            return total
        total += len(cols)
        offset = cols.next_offset


def _read_messages(log: Log, level: Any) -> int:
    offset, total = OFFSET_OLDEST, 0
    while True:
        offset, msgs = log.consume(offset, CALL, isolation_level=level)
        if not msgs:
            return total
        total += len(msgs)


READS = {"consume_columns": _read_columns, "consume": _read_messages}
LEVELS = ("read_committed", "read_uncommitted")


def run(records: int, txn_records: int, abort_every: int, repeat: int) -> Report:
    """Fill a log, read it ``repeat`` times per read path and level; the report's rows are
    read_committed against read_uncommitted (records/s of the log's records walked)."""
    started = time.perf_counter()
    samples = {r: {lv: Samples("records/s") for lv in LEVELS} for r in READS}
    with tempfile.TemporaryDirectory() as tmp, open_log(Path(tmp) / "p", create=True) as log:
        committed, aborted = fill(log, records, txn_records, abort_every)
        for i in range(repeat):
            for name, read in READS.items():
                for level in LEVELS if i % 2 == 0 else LEVELS[::-1]:  # order alternated
                    t0 = time.perf_counter()
                    got = read(log, level)
                    dt = time.perf_counter() - t0
                    want = committed if level == "read_committed" else committed + aborted
                    if got != want:
                        raise SystemExit(f"{name} {level}: {got} records, expected {want}")
                    # records/s of the log's records walked (aborted ones included)
                    samples[name][level].values.append((committed + aborted) / dt)
    rows = [
        Row(
            f"embedded {name}, read_committed vs read_uncommitted",
            samples[name]["read_committed"],
            "read_uncommitted",
            samples[name]["read_uncommitted"],
            target=GOAL,
        )
        for name in READS
    ]
    settings = {
        "records": records,
        "txn_records": txn_records,
        "abort_every": abort_every,
        "repeat": repeat,
        "committed": committed,
        "aborted": aborted,
    }
    return Report(rows, machine_info(), settings, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--txn-records", type=int, default=1_000)
    parser.add_argument("--abort-every", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report = run(args.records, args.txn_records, args.abort_every, args.repeat)
    print(
        f"{args.records:,} records x 100 B in transactions of {args.txn_records:,}, "
        f"1 in {args.abort_every} aborted; medians of {args.repeat} (records/s of the log)"
    )
    print(report.markdown())
    if args.json is not None:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
