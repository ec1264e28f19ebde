"""``benchmarks/schema_registry_bench.py`` with tiny sizes: a real broker and registry,
200 registrations. Checks that every row is printed with numbers and its references;
speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "schema_registry_bench.py"


@pytest.mark.broker
def test_schema_registry_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--schemas", "200", "--clients", "4", "--repeat", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert [r["reference"] for r in doc["rows"]] == [
        "trivial GET /schemas/types, same server",
        "storage append+fsync, same threads",
    ]
    for row in doc["rows"]:
        assert row["metric"] == "registrations/s, distinct small Avro schemas, 4 clients"
        assert math.isfinite(row["value"]), row
        assert row["value"] > 0, row
        assert row["reference_value"] > 0, row
        assert row["ratio"] == pytest.approx(row["value"] / row["reference_value"])
        assert f"| {row['metric']} |" in result.stdout
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(doc["rows"])
