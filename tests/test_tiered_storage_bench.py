"""``benchmarks/tiered_storage_bench.py`` with tiny sizes: a real broker, moto's S3 server,
4 MiB in 1 MiB segments. Checks that every row is printed with numbers and a same-run
reference; speed itself is never asserted here."""

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
    run.check_rows("value", "reference_value", "ratio", met=True)
    assert len(run.table()) == 1 + 3
