"""``benchmarks/spark_typed_bench.py`` with tiny sizes (2,000 rows, one round): a real
SparkSession in a subprocess. Checks that both rows are printed with numbers and a ratio;
speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "spark_typed_bench.py"


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_spark_typed_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    command = [sys.executable, str(SCRIPT), "--rows", "2000", "--repeat", "1", "--json", str(out)]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert [r["metric"] for r in doc["rows"]] == [
        "Spark count(), valueFormat=avro (10-field struct)",
        "Spark sum(value.flight), valueFormat=avro",
    ]
    for row in doc["rows"]:
        assert math.isfinite(row["value"]), row
        assert row["value"] > 0, row
        assert row["reference_value"] > 0, row
        assert row["ratio"] > 0, row
        assert f"| {row['metric']} |" in result.stdout
    assert doc["rows"][0]["met"] in (True, False)
