"""``benchmarks/typed_encode_bench.py`` with tiny sizes (500 rows, one round): both rows
printed with numbers and a ratio in ``seglog.bench``'s table; speed is never asserted."""

from __future__ import annotations

from pathlib import Path

from tests._bench import run_bench


def test_typed_encode_bench_prints_every_row(tmp_path: Path) -> None:
    run = run_bench("typed_encode_bench.py", tmp_path, "--rows", "500", "--repeat", "1")
    assert run.column("metric") == [
        "encode valueFormat=json (8 fields, validated)",
        "encode valueFormat=protobuf (8 fields)",
    ]
    run.check_report()
