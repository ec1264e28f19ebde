"""A transactional writer for the kill -9 tests: run as ``python _txn_writer.py <dir>
<first producer id> <seed>``, it writes transactions until killed and prints
``done <producer id> <commit 0|1> <marker offset>`` once a transaction's marker is durable
(``Log.sync`` returned)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))

from tests.storage._batches import make_batch, txn_batch

from seglog.storage import encode_control_batch, open_log


def main() -> None:
    directory, first_pid, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    open_txns: list[int] = []
    pid = first_pid
    with open_log(directory, create=True, segment_bytes=2048) as log:
        while True:
            if open_txns and rng.random() < 0.4:
                p = open_txns.pop(rng.randrange(len(open_txns)))
                commit = rng.random() < 0.6
                marker = encode_control_batch(
                    p, 0, commit=commit, coordinator_epoch=0, timestamp_ms=1
                )
                at = log.append(marker, origin="coordinator").base_offset
                log.sync()
                print(f"done {p} {int(commit)} {at}", flush=True)
            elif rng.random() < 0.3:
                log.append(make_batch(rng.randint(1, 4)))
            else:
                if not open_txns or rng.random() < 0.3:
                    open_txns.append(pid)
                    pid += 1
                p = rng.choice(open_txns)
                log.append(txn_batch(p, rng.randint(1, 5), tag=b"x" * rng.randint(0, 200)))


if __name__ == "__main__":
    main()
