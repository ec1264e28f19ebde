"""``benchmarks/group_protocols_bench.py`` with tiny sizes: a real broker, 3 members per
protocol, 2,000 records. Checks that every row of the table is printed with numbers;
speed itself is never asserted here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests._bench import run_bench

REFERENCES = ("classic, range (eager)", "classic, cooperative-sticky")


@pytest.mark.slow  # three protocols' rebalances and two reads: ~16 s
def test_group_protocols_bench_prints_every_row(tmp_path: Path) -> None:
    args = ["--records", "2000", "--members", "3", "--repeat", "1"]
    run = run_bench("group_protocols_bench.py", tmp_path, *args)
    expected = [
        f"rebalance, {event} (6 partitions): {what}, KIP-848"
        for event in ("member 3 joins 2", "1 of 3 leaves")
        for what in ("all partitions owned", "consumption resumed")
        for _ in REFERENCES
    ] + [
        f"share group, 4 consumers, 1 partition: {what}"
        for what in (
            "delivery rate (first record to last)",
            "delivery rate incl. joining",
            "records delivered twice",
        )
    ]
    assert run.column("metric") == expected
    assert run.column("reference")[:8] == list(REFERENCES) * 4
    for row in run.rows:
        assert math.isfinite(row["value"]), row
        assert row["value"] >= 0, row
        if row["reference"]:
            assert row["reference_value"] > 0, row
            assert row["ratio"] > 0, row
            assert f"| {row['metric']} |" in run.stdout
        if row["goal"]:
            assert row["met"] in (True, False), row
    assert run.rows[-1]["value"] == 0  # each record delivered once
    assert len(run.table()) == 1 + len(expected)
