"""``benchmarks/tiered_storage_bench.py`` with tiny sizes: a real broker, moto's S3 server,
4 MiB in 1 MiB segments. Checks that every row is printed with numbers, a same-run
reference and its ratio in ``seglog.bench``'s table; speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.slow  # a broker restarted, 3 fetches and an upload: ~15 s
def test_tiered_storage_bench_prints_every_row(tmp_path: Path) -> None:
    args = ["--mib", "4", "--segment-mib", "1", "--repeat", "1"]
    run = run_bench("tiered_storage_bench.py", tmp_path, *args)
    assert run.column("metric") == [
        "fetch of remote history from offset 0, warm cache",
        "fetch of remote history from offset 0, cold cache",
        "upload of closed segments (tier_sync, 4 MiB in 1 MiB segments)",
    ]
    assert run.column("target") == [0.5, 0.25, 0.8]
    assert run.column("unit") == ["MB/s"] * 3
    run.check_report(met=True)
