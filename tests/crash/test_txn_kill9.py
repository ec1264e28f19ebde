"""kill -9 of a transactional writer, cycle after cycle on one log: the recovered
transaction state (the snapshot of the last roll plus a replay of what follows) equals an
independent scan of the stored batches, every durable marker keeps its outcome, and
read_committed consume returns exactly the committed records below the LSO."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import warnings
from pathlib import Path

from seglog.storage import OFFSET_OLDEST, Log, open_log

from .conftest import record_figure

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords

WRITER = Path(__file__).with_name("_txn_writer.py")
CYCLES = 8


def _scan(log: Log) -> tuple[dict[int, int], list[tuple[int, int]], list[int], dict[int, bool]]:
    """(ongoing, aborted ranges, committed record offsets, marker outcomes) by reading
    every batch with kafka-python: the model the log's own state must equal."""
    ongoing: dict[int, int] = {}
    txn_of: dict[int, tuple[int, int]] = {}  # record offset -> (pid, txn first offset)
    plain: list[int] = []
    aborted: list[tuple[int, int]] = []
    outcome: dict[tuple[int, int], bool] = {}
    markers: dict[int, bool] = {}
    for raw in log.batches(OFFSET_OLDEST, log.log_end_offset):
        batch = MemoryRecords(bytes(raw)).next_batch()
        assert batch is not None
        pid = batch.producer_id
        if batch.is_control_batch:
            (record,) = list(batch)
            first = ongoing.pop(pid, batch.base_offset)
            outcome[(pid, first)] = record.commit
            markers[batch.base_offset] = record.commit
            if record.abort:
                aborted.append((pid, first))
        elif batch.is_transactional:
            first = ongoing.setdefault(pid, batch.base_offset)
            for r in batch:
                txn_of[r.offset] = (pid, first)
        else:
            plain += [r.offset for r in batch]
    lso = min([log.high_watermark, *ongoing.values()])
    committed = sorted(
        [o for o in plain if o < lso]
        + [o for o, t in txn_of.items() if o < lso and outcome.get(t, False)]
    )
    return ongoing, sorted(aborted, key=lambda a: a[1]), committed, markers


def test_kill_9_transactional_writer(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    rng = random.Random(20261126)
    durable: dict[int, bool] = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for cycle in range(CYCLES):
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(directory), str(1000 * (cycle + 1)), str(cycle)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(rng.randint(3, 15))]
        assert all(lines), "the writer died"  # a line per durable marker; "" at EOF
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for line in lines:
            _, _, commit, at = line.split()
            durable[int(at)] = commit == "1"
        with open_log(directory) as log:
            ongoing, aborted, committed, markers = _scan(log)
            assert log.ongoing_transactions() == ongoing
            assert log.aborted_transactions(0, log.log_end_offset) == aborted
            assert log.last_stable_offset == min([log.high_watermark, *ongoing.values()])
            _, msgs = log.consume(OFFSET_OLDEST, 1 << 20, isolation_level="read_committed")
            assert [m.offset for m in msgs] == committed
            for at, commit in durable.items():  # every durable marker kept its outcome
                assert markers[at] is commit
    segments = len(list(directory.glob("*.log")))
    record_figure(
        f"kill -9 of a transactional writer: {CYCLES} cycles, {len(durable)} durable markers, "
        f"{segments} segments, recovered state = independent scan"
    )
    assert segments > 3  # rolls (transaction snapshots) were exercised
