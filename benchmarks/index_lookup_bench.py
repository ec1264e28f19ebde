"""Lookups through the offset and time indexes, this tree against a reference tree (issue 7:
indexes moved off the Python heap must not make lookups slower).

One log is written (``--gib`` of 4 KiB record batches, ``--segment-mib`` segments, one
index entry per batch, each batch with its own timestamp), then each round runs one
worker process per tree, alternating which goes first: the worker opens the log
read-only (a clean shutdown: indexes loaded from their files) and times

- ``consume(offset, 1)`` at ``--lookups`` random offsets (an offset index lookup, one
  ``pread`` of the batch, one message decoded),
- ``consume(offset, 100)`` at random offsets (lookup + a read of ~100 KiB + decoding),
- ``offset_by_time(ts)`` at random timestamps (time index, then offset index),

in µs per call, plus the open time and the worker's RSS (anon) after the lookups. The
same random offsets and timestamps are used by both trees. Medians over ``--rounds``
rounds and the ratio this/reference are printed. The data is deleted at the end.

    .venv/bin/python benchmarks/index_lookup_bench.py --ref-src /work/main/src
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIB = 1 << 20
_TS = struct.Struct(">qq")  # baseTimestamp @27, maxTimestamp @35
_CRC = struct.Struct(">I")  # crc @17, over [21, end)
T0 = 1_700_000_000_000


def fill(path: Path, gib: float, segment_mib: int) -> int:
    """Write the log; returns the number of batches (batch i has offsets
    [3 i, 3 i + 3) and timestamp T0 + i)."""
    import crc32c  # noqa: PLC0415 (the parent only)
    import numpy as np  # noqa: PLC0415

    from seglog.storage import encode_records, open_log  # noqa: PLC0415

    per = 3
    template = encode_records(
        [b"v" * 1300] * per, None, np.zeros(per, dtype=np.int64), None, 1 << 30
    )
    n = len(template)
    chunk = bytearray(template * 256)
    batches = int(gib * (1 << 30)) // n
    with open_log(
        path, create=True, segment_bytes=segment_mib * MIB, index_interval_bytes=4096
    ) as log:
        done = 0
        while done < batches:
            k = min(256, batches - done)
            for j in range(k):
                pos = j * n
                _TS.pack_into(chunk, pos + 27, T0 + done + j, T0 + done + j)
                crc = crc32c.crc32c(memoryview(chunk)[pos + 21 : pos + n])
                _CRC.pack_into(chunk, pos + 17, crc)
            log.append(memoryview(chunk)[: k * n])
            done += k
    return batches


def _rss_anon_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


def worker(path: Path, batches: int, lookups: int, seed: int) -> None:
    """Time the lookups on the log at ``path``; print a JSON line."""
    from seglog.storage import open_log  # noqa: PLC0415

    rng = random.Random(seed)
    offsets = [rng.randrange(3 * batches) for _ in range(lookups)]
    stamps = [T0 + rng.randrange(batches) for _ in range(lookups)]
    started = time.perf_counter()
    log = open_log(path, read_only=True)
    out: dict[str, float] = {"open_ms": (time.perf_counter() - started) * 1e3}
    out["rss_open_kib"] = _rss_anon_kib()

    def consume1() -> None:
        for o in offsets:
            log.consume(o, 1)

    def consume100() -> None:
        for o in offsets[: lookups // 10]:
            log.consume(o, 100)

    def by_time() -> None:
        for t in stamps:
            log.offset_by_time(t)

    for name, call, count in (
        ("consume1_us", consume1, lookups),
        ("consume100_us", consume100, lookups // 10),
        ("by_time_us", by_time, lookups),
    ):
        started = time.perf_counter()
        call()
        out[name] = (time.perf_counter() - started) / count * 1e6
    out["rss_after_kib"] = _rss_anon_kib()
    log.close()
    print(json.dumps(out))


def _run(
    src: str, args: argparse.Namespace, path: Path, batches: int, seed: int
) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, __file__, "--worker", str(path), "--batches", str(batches)]
    cmd += ["--lookups", str(args.lookups), "--seed", str(seed)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def main() -> None:
    """Fill, then interleave reference and this tree's workers; print medians, ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref-src", required=False, help="the reference tree's src/")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--segment-mib", type=int, default=128)
    parser.add_argument("--lookups", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--batches", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker), args.batches, args.lookups, args.seed)
        return
    if not args.ref_src:
        parser.error("--ref-src is required")
    own = str(Path(__file__).resolve().parents[1] / "src")
    tmp = Path(tempfile.mkdtemp(prefix="seglog-lookup-"))
    try:
        batches = fill(tmp / "log", args.gib, args.segment_mib)
        runs: dict[str, list[dict[str, float]]] = {"ref": [], "this": []}
        for r in range(args.rounds):
            order = [("ref", args.ref_src), ("this", own)]
            for name, src in order if r % 2 == 0 else order[::-1]:
                runs[name].append(_run(src, args, tmp / "log", batches, seed=r))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{args.gib} GiB, {batches} batches of 3 records (4 KiB), {args.segment_mib} MiB "
        f"segments; {args.lookups} lookups per worker; medians of {args.rounds} rounds"
    )
    print(f"{'':>16} {'reference':>12} {'this':>12} {'ratio':>7}")
    for key in (
        "open_ms",
        "consume1_us",
        "consume100_us",
        "by_time_us",
        "rss_open_kib",
        "rss_after_kib",
    ):
        ref = statistics.median(x[key] for x in runs["ref"])
        this = statistics.median(x[key] for x in runs["this"])
        print(f"{key:>16} {ref:12.2f} {this:12.2f} {this / ref:7.2f}")


if __name__ == "__main__":
    main()
