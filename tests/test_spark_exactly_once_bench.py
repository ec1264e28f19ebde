"""``benchmarks/spark_exactly_once_bench.py`` with tiny sizes: a real broker and Spark
session, 20,000 rows, one timed write per sink. Checks that the row is printed with numbers
and that both sinks wrote every row (the script verifies with a read_committed read);
speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "spark_exactly_once_bench.py"


@pytest.mark.spark
@pytest.mark.slow  # a Spark session, a broker and 4 writes: ~40 s
def test_spark_exactly_once_bench_prints_its_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--rows", "20000", "--repeat", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["metric"] == "Spark wire sink, exactly-once (20,000 rows of 100 B)"
    assert row["reference_label"] == "at-least-once wire sink"
    for name in ("seglog", "reference", "ratio"):
        assert math.isfinite(row[name]), row
        assert row[name] > 0, row
    assert f"| {row['metric']} |" in result.stdout
