"""``benchmarks/spark_typed_bench.py`` with tiny sizes (2,000 rows, one round): a real
SparkSession in a subprocess. Checks that every row (Avro, Protobuf) is printed with
numbers and a ratio in ``seglog.bench``'s table; speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_spark_typed_bench_prints_every_row(tmp_path: Path) -> None:
    run = run_bench(
        "spark_typed_bench.py", tmp_path, "--rows", "2000", "--repeat", "1", timeout=600
    )
    assert run.column("metric") == [
        "Spark count(), valueFormat=avro (10-field struct)",
        "Spark sum(value.flight), valueFormat=avro",
        "Spark count(), valueFormat=protobuf (10-field message)",
        "Spark sum(value.flight), valueFormat=protobuf",
    ]
    assert run.column("target") == [0.6, None, 0.6, None]
    run.check_report()
    assert run.rows[0]["met"] in (True, False)
    assert run.rows[2]["met"] in (True, False)
