"""``benchmarks/iceberg_bench.py`` with tiny sizes: a real broker, one 2 MiB segment
committed after its roll, two Spark scans per side. Checks that both rows of the table
are printed with numbers; speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "iceberg_bench.py"


@pytest.mark.slow  # a broker, a 2 MiB segment, a SparkSession: ~25 s
@pytest.mark.spark
@pytest.mark.broker
def test_iceberg_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--segment-mib", "2", "--repeat", "1", "--scans", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args], check=False, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    metrics = [r["metric"] for r in doc["rows"]]
    assert metrics[0] == "Iceberg commit after a roll of a 2 MiB segment"
    assert metrics[1].startswith("Spark scan of the Iceberg tables' files (")
    for row in doc["rows"]:
        assert math.isfinite(row["value"]), row
        assert row["value"] > 0, row
        assert row["reference_value"] > 0, row
        assert row["ratio"] > 0, row
        assert row["met"] in (True, False), row
        assert f"| {row['metric']} |" in result.stdout
