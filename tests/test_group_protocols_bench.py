"""``benchmarks/group_protocols_bench.py`` with tiny sizes: a real broker, 3 members per
protocol, 2,000 records. Checks that every row of the table is printed with numbers;
speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "group_protocols_bench.py"
REFERENCES = ("classic, range (eager)", "classic, cooperative-sticky")


@pytest.mark.slow  # three protocols' rebalances and two reads: ~16 s
def test_group_protocols_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--records", "2000", "--members", "3", "--repeat", "1", "--json", str(out)]
    command = [sys.executable, str(SCRIPT), *args]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = [
        f"rebalance, {event} (6 partitions): {what}, KIP-848"
        for event in ("member 3 joins 2", "1 of 3 leaves")
        for what in ("all partitions owned", "consumption resumed")
        for _ in REFERENCES
    ] + [
        f"share group, 4 consumers, 1 partition: {what}"
        for what in (
            "delivery rate (first record to last)",
            "delivery rate incl. joining",
            "records delivered twice",
        )
    ]
    doc = json.loads(out.read_text())
    assert [r["metric"] for r in doc["rows"]] == expected
    assert [r["reference"] for r in doc["rows"][:8]] == list(REFERENCES) * 4
    for row in doc["rows"]:
        assert math.isfinite(row["value"]), row
        assert row["value"] >= 0, row
        if row["reference"]:
            assert row["reference_value"] > 0, row
            assert row["ratio"] > 0, row
            assert f"| {row['metric']} |" in result.stdout
        if row["goal"]:
            assert row["met"] in (True, False), row
    assert doc["rows"][-1]["value"] == 0  # each record delivered once
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(expected)
