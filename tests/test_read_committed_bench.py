"""``benchmarks/read_committed_bench.py`` with tiny sizes: every row printed with numbers
and its ratio in ``seglog.bench``'s table (the script itself checks each read returned the
expected record count); speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

from tests._bench import run_bench


def test_read_committed_bench_prints_every_row(tmp_path: Path) -> None:
    args = ["--records", "5000", "--txn-records", "100", "--repeat", "1"]
    run = run_bench("read_committed_bench.py", tmp_path, *args)
    assert run.column("metric") == [
        "embedded consume_columns, read_committed vs read_uncommitted",
        "embedded consume, read_committed vs read_uncommitted",
    ]
    assert run.column("reference_name") == ["read_uncommitted"] * 2
    assert run.column("unit") == ["records/s"] * 2
    run.check_report(met=True)
    assert run.doc["options"]["aborted"] == 500  # 1 transaction of 100 in 10
