"""``benchmarks/spark_exactly_once_bench.py`` with tiny sizes: a real broker and Spark
session, 20,000 rows, one timed write per sink. Checks that the row is printed with numbers
and its ratio in ``seglog.bench``'s table and that both sinks wrote every row (the script
verifies with a read_committed read); speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.spark
@pytest.mark.slow  # a Spark session, a broker and 4 writes: ~40 s
def test_spark_exactly_once_bench_prints_its_row(tmp_path: Path) -> None:
    run = run_bench(
        "spark_exactly_once_bench.py", tmp_path, "--rows", "20000", "--repeat", "1", timeout=600
    )
    (row,) = run.rows
    assert row["metric"] == "Spark wire sink, exactly-once (20,000 rows of 100 B)"
    assert row["reference_name"] == "at-least-once wire sink"
    assert row["unit"] == "rows/s"
    run.check_report()
