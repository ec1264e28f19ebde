"""``benchmarks/schema_registry_bench.py`` with tiny sizes: a real broker and registry,
200 registrations. Checks that every row is printed with numbers, its references and its
ratio in ``seglog.bench``'s table; speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.broker
def test_schema_registry_bench_prints_every_row(tmp_path: Path) -> None:
    args = ["--schemas", "200", "--clients", "4", "--repeat", "1"]
    run = run_bench("schema_registry_bench.py", tmp_path, *args)
    assert run.column("reference_name") == [
        "trivial GET /schemas/types, same server",
        "storage append+fsync, same threads",
    ]
    assert set(run.column("metric")) == {"registrations/s, distinct small Avro schemas, 4 clients"}
    assert run.column("reference_unit") == ["requests/s", "appends/s"]
    assert run.column("goal") == [">= 1,000/s"] * 2
    run.check_report(met=True)
