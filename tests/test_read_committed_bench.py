"""``benchmarks/read_committed_bench.py`` with tiny sizes: every row printed with numbers
(the script itself checks each read returned the expected record count); speed itself is
never asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "read_committed_bench.py"


def test_read_committed_bench_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--records", "5000", "--txn-records", "100", "--repeat", "1", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert [r["metric"] for r in doc["rows"]] == [
        "embedded consume_columns, read_committed vs read_uncommitted",
        "embedded consume, read_committed vs read_uncommitted",
    ]
    for row in doc["rows"]:
        assert row["read_committed"] > 0
        assert math.isclose(row["ratio"], row["read_committed"] / row["read_uncommitted"])
        assert row["metric"] in result.stdout
    assert doc["settings"]["aborted"] == 500  # 1 transaction of 100 in 10
