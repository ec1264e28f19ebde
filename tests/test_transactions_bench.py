"""``benchmarks/transactions_bench.py`` with tiny sizes: a real broker, 2,000 records.
Checks that both rows are printed with numbers; speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.slow  # a broker, two produces and two reads: ~10 s
def test_transactions_bench_prints_every_row(tmp_path: Path) -> None:
    args = ["--records", "2000", "--per-txn", "500", "--repeat", "1"]
    run = run_bench("transactions_bench.py", tmp_path, *args)
    assert run.column("metric") == [
        "transactional produce, commit every 500 records of 1 KiB",
        "read_committed fetch (committed transactions)",
    ]
    assert run.column("reference") == ["idempotent produce", "read_uncommitted fetch"]
    run.check_rows("value", "reference_value", met=True)
    assert all(len(v) == 1 for v in run.doc["samples"].values())
