"""Compaction throughput: MB/s of ``seglog.storage.compact`` over a log of records of
100 B to 1 KiB with many duplicate keys (prints one line).

    .venv/bin/python benchmarks/compaction.py [--mb 100] [--keys 20000] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

import seglog
from seglog.storage import Message, compact


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100, help="log size to build (MB)")
    ap.add_argument("--keys", type=int, default=20_000, help="distinct keys")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        rng = random.Random(1)
        payload = rng.randbytes(1024)
        log = seglog.open_log(root / "bench-0", create=True, segment_bytes=16 << 20)
        target = args.mb * 1_000_000
        written = 0
        t0 = time.perf_counter()
        while written < target:
            batch = []
            for _ in range(1000):
                size = rng.randint(100, 1024)
                written += size
                key = b"key-%06d" % rng.randrange(args.keys)
                batch.append(Message(key=key, value=payload[:size], timestamp=1_000))
            log.publish(batch)
        build = time.perf_counter() - t0
        size = log.stat()["bytes"]
        records = log.log_end_offset
        t0 = time.perf_counter()
        res = compact(log, now_ms=10**12)
        took = time.perf_counter() - t0
        left = log.stat()["bytes"]
        log.close()
        print(
            f"compaction: {size / 1e6:.1f} MB, {records} records, {args.keys} keys -> "
            f"{len(res.offsets)} removed, {left / 1e6:.1f} MB left; {took:.2f} s = "
            f"{size / 1e6 / took:.1f} MB/s ({records / took:,.0f} records/s; build {build:.1f} s)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
