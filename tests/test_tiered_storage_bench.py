"""``benchmarks/tiered_storage_bench.py`` with tiny sizes: a real broker, moto's S3 server,
4 MiB in 1 MiB segments. Checks that every row is printed with numbers and a same-run
reference; speed itself is never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "tiered_storage_bench.py"


@pytest.mark.slow  # a broker restarted, 3 fetches and an upload: ~15 s
def test_tiered_storage_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--mib", "4", "--segment-mib", "1", "--repeat", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert [r["metric"] for r in doc["rows"]] == [
        "fetch of remote history from offset 0, warm cache",
        "fetch of remote history from offset 0, cold cache",
        "upload of closed segments (tier_sync, 4 MiB in 1 MiB segments)",
    ]
    for row in doc["rows"]:
        assert math.isfinite(row["value"]), row
        assert row["value"] > 0, row
        assert row["reference_value"] > 0, row
        assert row["ratio"] > 0, row
        assert row["met"] in (True, False), row
        assert f"| {row['metric']} |" in result.stdout
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 3
