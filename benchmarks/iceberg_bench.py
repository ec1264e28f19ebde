"""Iceberg topics (``seglog.iceberg.mode=key_value``) against one ``seglog serve``, each
figure next to a reference measured in the same run:

- **commit latency after a roll**: a 1-partition topic with ``segment.bytes`` = 64 MiB
  (default) is filled with 1 KiB records (confluent-kafka, hex text values) to just under
  the limit; then one larger record rolls the segment. Measured: from that produce to the
  table's current snapshot recording the rolled segment's end offset
  (``seglog.offsets.0``), as a reader polling the catalog sees it. Reference: a Parquet
  mirror of the same segment (``seglog.columnar.sync_mirrors``: decode + write, no
  catalog), timed in this process. Goal: <= 2 s.
- **Spark scan of the tables' files**: the shared local SparkSession reads the Parquet
  data files of every repeat's table (their current snapshots,
  ``seglog.iceberg.data_files``) with ``spark.read.parquet`` and computes ``count()``,
  ``sum(length(value))`` and ``max(offset)``; reference: the same query over one Parquet
  file of the same rows written directly with pyarrow (its defaults). Goal: >= 0.9x
  (rows/s).

Prints ``seglog.bench``'s markdown table of medians over ``--repeat`` runs; ``--json FILE``
writes the report (``Report.to_dict``: rows, every sample, settings).

    .venv/bin/python benchmarks/iceberg_bench.py              # 64 MiB segments, 3 repeats
    .venv/bin/python benchmarks/iceberg_bench.py --segment-mib 4 --repeat 1   # tiny
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench import Report, Row, Samples, machine_info, spark_session
from seglog.broker import start_broker
from seglog.columnar import sync_mirrors
from seglog.iceberg import (
    catalog_properties,
    data_files,
    load_topic_table,
    open_catalog,
    summary_of,
)

VALUE = 1000
VALUES = [os.urandom(VALUE // 2).hex().encode() for _ in range(256)]
"""1000-byte values, hex of random bytes: about 2:1 compressible, like text."""
TIMEOUT_S = 120.0
COMMIT_GOAL_S = 2.0
"""The commit latency this benchmark aims at (seconds)."""


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fill(bootstrap: str, topic: str, segment: Path, limit: int) -> int:
    """Produce 1 KiB records until the active segment is within 256 KiB of ``limit``
    bytes; returns the records produced."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "batch.size": 256 * 1024})  # fmt: skip
    n = 0
    while True:
        goal = (limit - (256 << 10) - segment.stat().st_size) // (VALUE + 80)
        if goal <= 0:
            return n
        for _ in range(goal):
            while True:
                try:
                    producer.produce(topic, VALUES[n % len(VALUES)], str(n).encode())
                    break
                except BufferError:
                    producer.poll(0.05)
            n += 1
        assert producer.flush(60) == 0


def _roll(bootstrap: str, topic: str, size: int) -> float:
    """Produce one ``size``-byte record (it rolls the segment); returns when it was sent."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.max.bytes": size + 4096})  # fmt: skip
    began = time.perf_counter()
    producer.produce(topic, b"r" * size, b"roll")
    assert producer.flush(30) == 0
    return began


def _wait_table(catalog: Any, topic: str) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return load_topic_table(catalog, topic, create=False)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _commit_latency(
    bootstrap: str, data: Path, topic: str, segment_bytes: int, catalog: Any
) -> tuple[float, float, int]:
    """(commit latency after the roll, mirror time of the same segment, rows)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"seglog.iceberg.mode": "key_value", "segment.bytes": str(segment_bytes)}
    admin.create_topics([NewTopic(topic, 1, config=configs)])[topic].result(30)
    _wait_table(catalog, topic)  # steady state: the broker made the table on its first look
    segment = data / f"{topic}-0" / f"{0:020d}.log"
    rows = _fill(bootstrap, topic, segment, segment_bytes)
    began = _roll(bootstrap, topic, min(segment_bytes - segment.stat().st_size + 1024, 1 << 20))
    want = str(rows)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        table = load_topic_table(catalog, topic, create=False)
        if summary_of(table).get("seglog.offsets.0") == want:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"no commit of {topic}'s rolled segment in {TIMEOUT_S} s")
        time.sleep(0.01)
    latency = time.perf_counter() - began
    start = time.perf_counter()
    report = sync_mirrors(data, topic)
    mirror = time.perf_counter() - start
    assert len(report.built) == 1, report
    return latency, mirror, rows


def _scan(spark: Any, paths: list[str]) -> float:
    """Seconds of one aggregate over the rows of ``paths``."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark only here

    began = time.perf_counter()
    row = (
        spark.read.parquet(*paths)
        .agg(F.count("*"), F.sum(F.length("value")), F.max("offset"))
        .collect()[0]
    )
    elapsed = time.perf_counter() - began
    assert row[0] > 0
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segment-mib", type=int, default=64, help="segment.bytes in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scans", type=int, default=5, help="Spark scans per side")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    segment_bytes = args.segment_mib << 20
    started = time.perf_counter()
    samples = {
        "commit": Samples("s"),
        "mirror": Samples("s"),
        "iceberg": Samples("rows/s"),
        "parquet": Samples("rows/s"),
    }
    with tempfile.TemporaryDirectory(prefix="seglog-iceberg-bench-") as tmp:
        data = Path(tmp) / "data"
        proc = start_broker(data, extra_args=["--message-max-bytes", str(2 << 20)])
        try:
            catalog = open_catalog(catalog_properties(data))
            total_rows = 0
            for i in range(args.repeat):
                topic = f"bench-{i}"
                latency, mirror, rows = _commit_latency(
                    proc.bootstrap, data, topic, segment_bytes, catalog
                )
                total_rows += rows
                samples["commit"].values.append(latency)
                samples["mirror"].values.append(mirror)
                _log(f"{topic}: {rows} rows, commit {latency:.3f} s, mirror {mirror:.3f} s")
            tables = [load_topic_table(catalog, f"bench-{i}", create=False)
                      for i in range(args.repeat)]  # fmt: skip
            files = [f for table in tables for f in data_files(table)]
            direct = Path(tmp) / "direct.parquet"
            every = pa.concat_tables([table.scan().to_arrow() for table in tables])
            pq.write_table(every, direct)
            rows = every.num_rows
        finally:
            assert proc.stop() == 0, proc.log_text()
        spark = spark_session()
        try:
            _scan(spark, files)  # warm-up: JVM, page cache
            _scan(spark, [str(direct)])
            for _ in range(args.scans):  # interleaved
                samples["iceberg"].values.append(rows / _scan(spark, files))
                samples["parquet"].values.append(rows / _scan(spark, [str(direct)]))
        finally:
            spark.stop()  # type: ignore[attr-defined]
    mib = args.segment_mib
    commit = samples["commit"]
    out = [
        Row(f"Iceberg commit after a roll of a {mib} MiB segment", commit,
            "Parquet mirror of the same segment", samples["mirror"],
            goal=f"<= {COMMIT_GOAL_S:g} s", goal_met=commit.median <= COMMIT_GOAL_S),
        Row(f"Spark scan of the Iceberg tables' files ({rows:,} rows)", samples["iceberg"],
            "Parquet written by pyarrow, same rows", samples["parquet"], target=0.9),
    ]  # fmt: skip
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report(out, machine_info(), settings, time.perf_counter() - started)
    print(report.markdown())
    if args.json is not None:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
