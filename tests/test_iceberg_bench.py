"""``benchmarks/iceberg_bench.py`` with tiny sizes: a real broker, one 2 MiB segment
committed after its roll, two Spark scans per side. Checks that both rows of
``seglog.bench``'s table are printed with numbers and a ratio; speed itself is never
asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.slow  # a broker, a 2 MiB segment, a SparkSession: ~25 s
@pytest.mark.spark
@pytest.mark.broker
def test_iceberg_bench_prints_every_row(tmp_path: Path) -> None:
    args = ["--segment-mib", "2", "--repeat", "1", "--scans", "1"]
    run = run_bench("iceberg_bench.py", tmp_path, *args)
    metrics = run.column("metric")
    assert metrics[0] == "Iceberg commit after a roll of a 2 MiB segment"
    assert metrics[1].startswith("Spark scan of the Iceberg tables' files (")
    assert run.column("unit") == ["s", "rows/s"]
    assert run.column("goal") == ["<= 2 s", None]
    assert run.column("target") == [None, 0.9]
    run.check_report(met=True)
