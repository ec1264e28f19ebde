"""Structured Streaming reads of large partitions: ``readStream.format("seglog")`` rows/s at
1 GiB per partition, next to a batch read of the same topic in the same run, and what a
trigger would pay if it reopened the logs instead of refreshing them.

- topic: ``--partitions`` partitions of ``--partition-gib`` GiB each (``--value-bytes``
  values, 16 distinct keys), written with the embedded API (``Log.publish_values``), one
  segment per GiB (the default ``segment.bytes``);
- batch (the reference): ``spark.read.format("seglog")`` → Spark's built-in ``noop`` sink;
- streaming: ``readStream.format("seglog")`` with ``maxOffsetsPerTrigger`` →
  ``writeStream.format("noop")``, ``trigger(availableNow=True)``: rows/s over the whole
  query, triggers, the median per-trigger ``latestOffset`` + ``queryPlanning`` ms from
  the query's progress (what planning a trigger costs on logs kept open and refreshed), and
  each phase's median ms (Spark's own ``walCommit`` / ``commitOffsets`` included); the same
  without a trigger limit (one trigger);
- reopen vs refresh: a read-only open of one partition's log (CRC-scans the active
  segment's tail) next to ``Log.refresh()`` on a log kept open — the per-trigger cost the
  reader avoids.

Runs are interleaved (batch, streaming) ``--repeat`` times; medians printed.

    .venv/bin/python benchmarks/spark_stream_bench.py                 # 2 x 1 GiB, 3 repeats
    .venv/bin/python benchmarks/spark_stream_bench.py --partition-gib 0.1 --repeat 1
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import seglog.spark
from seglog.bench import spark_session
from seglog.storage import DataDir

TOPIC = "stream-bench"
CHUNK = 8192
"""Records per ``publish_values`` call while writing the topic."""


def _write(path: Path, partitions: int, gib: float, value_bytes: int) -> int:
    """Fill the topic; returns the record count."""
    per_partition = int(gib * (1 << 30)) // (value_bytes + 30)
    keys = [b"key-%02d" % (i % 16) for i in range(CHUNK)]
    with DataDir(path, create=True) as data_dir:
        data_dir.create_topic(TOPIC, partitions)
        for p in range(partitions):
            log = data_dir.log(TOPIC, p)
            written = 0
            while written < per_partition:
                n = min(CHUNK, per_partition - written)
                values = [(b"%012d|" % (written + i)).ljust(value_bytes, b"v") for i in range(n)]
                log.publish_values(values, keys[:n])
                written += n
            log.sync()
            print(f"  partition {p}: {written:,} records, {log.stat()['bytes'] / 2**30:.2f} GiB",
                  flush=True)  # fmt: skip
    return per_partition * partitions


def _batch(spark: Any, path: Path, rows: int) -> float:
    started = time.perf_counter()
    df = spark.read.format("seglog").option("subscribe", TOPIC).load(str(path))
    df.write.format("noop").mode("overwrite").save()
    return rows / (time.perf_counter() - started)


def _stream(spark: Any, path: Path, rows: int, max_offsets: int, checkpoint: Path
            ) -> tuple[float, int, float]:  # fmt: skip
    """(rows/s, triggers, median planning ms per trigger); ``max_offsets`` 0: no limit
    (availableNow reads everything in one trigger)."""
    shutil.rmtree(checkpoint, ignore_errors=True)
    reader = spark.readStream.format("seglog").option("subscribe", TOPIC)
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    stream = reader.option("startingOffsets", "earliest").load(str(path))
    started = time.perf_counter()
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    got = sum(p["numInputRows"] for p in progress)
    if got != rows:
        raise RuntimeError(f"the stream read {got} rows, expected {rows}")
    planning = [
        p["durationMs"].get("latestOffset", 0) + p["durationMs"].get("queryPlanning", 0)
        for p in progress
    ]
    keys = sorted({k for p in progress for k in p["durationMs"]})
    phases = {k: statistics.median(p["durationMs"].get(k, 0) for p in progress) for k in keys}
    print("    per-trigger ms (median):", phases, flush=True)
    return rows / elapsed, len(progress), statistics.median(planning)


def _reopen_vs_refresh(path: Path) -> tuple[float, float]:
    """(ms to open partition 0 read-only, ms to refresh it when kept open), medians of 5."""
    opens, refreshes = [], []
    for _ in range(5):
        started = time.perf_counter()
        with DataDir(path, create=False, read_only=True) as data_dir:
            log = data_dir.log(TOPIC, 0)
            opens.append(time.perf_counter() - started)
            started = time.perf_counter()
            log.refresh()
            refreshes.append(time.perf_counter() - started)
    return statistics.median(opens) * 1e3, statistics.median(refreshes) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--partition-gib", type=float, default=1.0)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument(
        "--max-offsets", type=int, default=250_000, help="maxOffsetsPerTrigger (all partitions)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: /tmp)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="seglog-stream-bench-", dir=args.dir))
    path = work / "data"
    try:
        print(f"writing {args.partitions} x {args.partition_gib} GiB ...", flush=True)
        rows = _write(path, args.partitions, args.partition_gib, args.value_bytes)
        spark = spark_session()
        seglog.spark.register(spark)
        _batch(spark, path, rows)  # warm-up: JIT, Python workers, page cache
        batch: list[float] = []
        stream: list[float] = []
        whole: list[float] = []
        triggers, planning = 0, []
        for rnd in range(args.repeat):
            batch.append(_batch(spark, path, rows))
            rate, triggers, plan_ms = _stream(spark, path, rows, args.max_offsets, work / "ck")
            stream.append(rate)
            planning.append(plan_ms)
            whole.append(_stream(spark, path, rows, 0, work / "ck-whole")[0])
            print(f"  round {rnd + 1}/{args.repeat}: batch {batch[-1] / 1e6:.3f} M rows/s, "
                  f"streaming {rate / 1e6:.3f} M rows/s ({triggers} triggers, planning "
                  f"{plan_ms:.0f} ms/trigger), one trigger {whole[-1] / 1e6:.3f} M rows/s",
                  flush=True)  # fmt: skip
        spark.stop()
        open_ms, refresh_ms = _reopen_vs_refresh(path)
        b, s = statistics.median(batch), statistics.median(stream)
        record_mib = (args.value_bytes + 30) / 2**20  # stored bytes of one record, about
        print()
        size = f"{args.partitions} x {args.partition_gib} GiB, {args.value_bytes} B values"
        print(f"| measurement ({size}, {rows:,} rows) | result | reference | ratio |")
        print("|---|---|---|---|")
        print(f"| streaming `readStream.format(\"seglog\")`, maxOffsetsPerTrigger "
              f"{args.max_offsets:,} ({triggers} triggers) | {s / 1e6:.3f} M rows/s "
              f"({s * record_mib:.0f} MiB/s) | batch read {b / 1e6:.3f} M rows/s "
              f"| {s / b:.2f}x |")  # fmt: skip
        w = statistics.median(whole)
        print(f"| streaming, no trigger limit (availableNow: one trigger) | {w / 1e6:.3f} M "
              f"rows/s ({w * record_mib:.0f} MiB/s) | batch read | {w / b:.2f}x |")  # fmt: skip
        print(f"| planning per trigger (latestOffset + queryPlanning) | "
              f"{statistics.median(planning):.0f} ms | | |")  # fmt: skip
        print(f"| per-trigger log access, kept open (`refresh`) | {refresh_ms:.2f} ms | "
              f"read-only reopen {open_ms:.1f} ms | {refresh_ms / open_ms:.3f}x |")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
