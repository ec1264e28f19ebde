"""The Spark wire sink, exactly-once (``exactlyOnce=true``: Kafka transactions the driver
commits) next to the at-least-once one, on the same rows in the same run.

- rows: ``--rows`` records (``--value-bytes`` values, 1,000 distinct keys) in one Parquet
  file written once by Spark, read back by every write (2 input partitions: 2 tasks);
- sink: ``df.write.format("seglog")`` with ``kafka.bootstrap.servers`` of a ``seglog serve``
  started here, into a fresh topic of ``--partitions`` partitions per write; at-least-once
  (the reference) and exactly-once, in alternating order, after one untimed write of each
  (the first writes of a session run cold);
- exactly-once pays per task an InitProducerId, one AddPartitionsToTxn per partition and
  a CRC per record batch it stamps, and per write one EndTxn per task from the driver
  (plus the markers the broker writes); rows/s are over the whole ``save()``.

Prints ``seglog.bench``'s markdown table: medians of ``--repeat`` runs; the ratio is
exactly-once / at-least-once; ``--json FILE`` writes the report (``Report.to_dict``: rows,
every sample, settings).

    .venv/bin/python benchmarks/spark_exactly_once_bench.py               # 1 M rows, 5 repeats
    .venv/bin/python benchmarks/spark_exactly_once_bench.py --rows 20000 --repeat 1
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

import seglog.spark
from seglog.bench import Report, Row, Samples, machine_info, spark_session
from seglog.broker import start_broker

MODES = ("at-least-once", "exactly-once")


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)


def _write(spark: Any, parquet: Path, bootstrap: str, topic: str, exactly_once: bool) -> float:
    """One ``save()``; returns its seconds."""
    df = spark.read.parquet(str(parquet))
    writer = (
        df.write.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", str(exactly_once).lower())
        .mode("append")
    )
    started = time.perf_counter()
    writer.save()
    return time.perf_counter() - started


def _count(spark: Any, bootstrap: str, topic: str) -> int:
    """Rows a read_committed Spark read of ``topic`` sees."""
    return int(
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .count()
    )


def main(argv: list[str] | None = None) -> Report:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="seglog-eos-bench-"))
    spark = spark_session()
    seglog.spark.register(spark)
    broker = start_broker(work / "data", log_path=work / "broker.log")
    try:
        parquet = work / "rows.parquet"
        pad = max(args.value_bytes - 12, 0)
        (spark.range(0, args.rows, numPartitions=2)
         .selectExpr("CAST(id % 1000 AS STRING) AS key",
                     f"concat(lpad(CAST(id AS STRING), 12, '0'), repeat('v', {pad})) AS value")
         .write.parquet(str(parquet)))  # fmt: skip
        seconds: dict[str, list[float]] = collections.defaultdict(list)
        topics = iter(range(1 << 30))

        def run(mode: str, timed: bool) -> None:
            topic = f"eos-bench-{next(topics)}"
            _create(broker.bootstrap, topic, args.partitions)
            took = _write(spark, parquet, broker.bootstrap, topic, mode == "exactly-once")
            if _count(spark, broker.bootstrap, topic) != args.rows:
                raise RuntimeError(f"{mode}: the topic does not hold {args.rows} rows")
            if timed:
                seconds[mode].append(took)
                print(f"  {mode}: {args.rows / took:,.0f} rows/s ({took:.2f} s)", flush=True)

        for mode in MODES:  # warm-up
            run(mode, timed=False)
        for rnd in range(args.repeat):
            order = MODES if rnd % 2 == 0 else MODES[::-1]
            for mode in order:
                run(mode, timed=True)
    finally:
        broker.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    rates = {m: Samples("rows/s", [args.rows / t for t in seconds[m]]) for m in MODES}
    row = Row(
        f"Spark wire sink, exactly-once ({args.rows:,} rows of {args.value_bytes} B)",
        rates["exactly-once"],
        "at-least-once wire sink",
        rates["at-least-once"],
    )
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report([row], machine_info(), settings, time.perf_counter() - started)
    print(report.markdown())
    if args.json:
        report.write_json(args.json)
    return report


if __name__ == "__main__":
    main()
