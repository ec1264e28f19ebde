"""``benchmarks/transactions_bench.py`` with tiny sizes: a real broker, 2,000 records.
Checks that both rows are printed with numbers; speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "transactions_bench.py"


@pytest.mark.slow  # a broker, two produces and two reads: ~10 s
def test_transactions_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--records", "2000", "--per-txn", "500", "--repeat", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert [r["metric"] for r in doc["rows"]] == [
        "transactional produce, commit every 500 records of 1 KiB",
        "read_committed fetch (committed transactions)",
    ]
    assert [r["reference"] for r in doc["rows"]] == [
        "idempotent produce",
        "read_uncommitted fetch",
    ]
    for row in doc["rows"]:
        assert math.isfinite(row["value"]), row
        assert row["value"] > 0, row
        assert row["reference_value"] > 0, row
        assert row["met"] in (True, False), row
        assert f"| {row['metric']} |" in result.stdout
    assert all(len(v) == 1 for v in doc["samples"].values())
