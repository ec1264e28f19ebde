"""Spark typed Avro and Protobuf reads against the same rows read as binary, in one session.

A topic of flight-like Avro records and one of the same rows as proto3 messages (Confluent
wire format, schemas in the data directory's ``_schemas``; see ``seglog.bench._spark_typed``)
read with ``format("seglog")``: ``valueFormat=avro`` / ``protobuf`` (the ``value`` column a
struct of 10 fields) against no ``valueFormat`` (``value`` binary), ``count()`` each,
interleaved rounds after a warm-up; plus ``sum(value.flight)`` over the typed reads. Goal:
typed >= 0.6x binary.

Prints ``seglog.bench``'s markdown table of medians over ``--repeat`` rounds; ``--json
FILE`` writes the report (``Report.to_dict``: rows, every sample, settings).

    .venv/bin/python benchmarks/spark_typed_bench.py                  # 1 M rows, 5 rounds
    .venv/bin/python benchmarks/spark_typed_bench.py --rows 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import seglog.spark
from seglog.bench import Report, Row, machine_info, spark_session, spark_typed_reads

GOAL = 0.6


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rows(results: Any) -> list[Row]:
    return [
        Row("Spark count(), valueFormat=avro (10-field struct)", results.typed,
            "same rows, value binary", results.binary, target=GOAL),
        Row("Spark sum(value.flight), valueFormat=avro", results.typed_sum,
            "binary count()", results.binary),
        Row("Spark count(), valueFormat=protobuf (10-field message)", results.proto,
            "same rows, value binary", results.proto_binary, target=GOAL),
        Row("Spark sum(value.flight), valueFormat=protobuf", results.proto_sum,
            "binary count()", results.proto_binary),
    ]  # fmt: skip


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    args = parser.parse_args()
    started = time.perf_counter()
    spark = spark_session()
    seglog.spark.register(spark)
    try:
        with tempfile.TemporaryDirectory(prefix="spark-typed-bench-") as work:
            results = spark_typed_reads(spark, Path(work), args.rows, args.repeat, _log)
    finally:
        spark.stop()
    for name, found in vars(results).items():
        if found.error:
            raise SystemExit(f"{name}: {found.error}")
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report(_rows(results), machine_info(), settings, time.perf_counter() - started)
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
