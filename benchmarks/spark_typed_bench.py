"""Spark typed Avro reads against the same rows read as binary, in one session.

A topic of flight-like Avro records (Confluent wire format, schema in the data directory's
``_schemas``; see ``seglog.bench._spark_typed``) read with ``format("seglog")``:
``valueFormat=avro`` (the ``value`` column a struct of 10 fields) against no
``valueFormat`` (``value`` binary), ``count()`` each, interleaved rounds after a warm-up;
plus ``sum(value.flight)`` over the typed read. Goal: typed >= 0.6x binary.

Prints a markdown table of medians over ``--repeat`` rounds; ``--json FILE`` writes it, the
settings and every sample.

    .venv/bin/python benchmarks/spark_typed_bench.py                  # 1 M rows, 5 rounds
    .venv/bin/python benchmarks/spark_typed_bench.py --rows 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import seglog.spark
from seglog.bench import spark_session, spark_typed_reads

GOAL = 0.6


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rows(samples: dict[str, list[float]]) -> list[dict[str, Any]]:
    med = {k: statistics.median(v) for k, v in samples.items()}
    binary = med["binary"]
    return [
        {
            "metric": "Spark count(), valueFormat=avro (10-field struct)",
            "unit": "rows/s",
            "value": med["typed"],
            "reference": "same rows, value binary",
            "reference_value": binary,
            "ratio": med["typed"] / binary,
            "goal": f">= {GOAL}x",
            "met": med["typed"] / binary >= GOAL,
        },
        {
            "metric": "Spark sum(value.flight), valueFormat=avro",
            "unit": "rows/s",
            "value": med["typed_sum"],
            "reference": "binary count()",
            "reference_value": binary,
            "ratio": med["typed_sum"] / binary,
            "goal": "",
            "met": None,
        },
    ]


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| metric | seglog | reference (same run) | ratio | goal |",
        "|---|--:|---|--:|---|",
    ]
    for r in rows:
        mark = "" if r["met"] is None else (" ✓" if r["met"] else " ✗")
        lines.append(
            f"| {r['metric']} | {r['value']:,.0f} | {r['reference_value']:,.0f} "
            f"{r['reference']} | {r['ratio']:.2f}x | {r['goal']}{mark} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    args = parser.parse_args()
    spark = spark_session()
    seglog.spark.register(spark)
    try:
        with tempfile.TemporaryDirectory(prefix="spark-typed-bench-") as work:
            results = spark_typed_reads(spark, Path(work), args.rows, args.repeat, _log)
    finally:
        spark.stop()
    samples = {
        "typed": results.typed.values,
        "binary": results.binary.values,
        "typed_sum": results.typed_sum.values,
    }
    for name, found in ((n, s) for n, s in vars(results).items()):
        if found.error:
            raise SystemExit(f"{name}: {found.error}")
    rows = _rows(samples)
    print(_table(rows))
    if args.json:
        doc = {"settings": vars(args) | {"json": str(args.json)}, "rows": rows, "samples": samples}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
