"""``benchmarks/iceberg_values_bench.py`` with tiny sizes: 2,000 records of each format
committed once. Checks that both rows of ``seglog.bench``'s table are printed with numbers
and a ratio; speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

from tests._bench import run_bench


def test_iceberg_values_bench_prints_every_row(tmp_path: Path) -> None:
    run = run_bench("iceberg_values_bench.py", tmp_path, "--records", "2000", "--repeat", "1")
    assert run.column("metric") == [
        "value_schema commit, Protobuf values (2,000 records)",
        "value_schema commit, JSON Schema values (2,000 records)",
    ]
    assert run.column("unit") == ["records/s", "records/s"]
    assert run.column("reference_name") == ["Avro values of the same fields"] * 2
    run.check_report()
