"""``benchmarks/kip848_handover_bench.py`` with one group per broker: two real brokers
(the short interval for waiting members on and off), two confluent-kafka members each.
Checks that the row is printed with numbers and its ratio in ``seglog.bench``'s table;
speed itself is never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._bench import run_bench


@pytest.mark.slow  # two brokers, one hand-over each: ~6 s
def test_kip848_handover_bench_prints_its_row(tmp_path: Path) -> None:
    run = run_bench("kip848_handover_bench.py", tmp_path, "--groups", "1")
    assert [row["metric"] for row in run.rows] == [
        "KIP-848 hand-over, owner's on_revoke to newcomer's on_assign "
        "(heartbeat 500 ms, waiting members 50 ms)"
    ]
    assert run.column("unit") == ["s"]
    run.check_report()
    assert [len(run.rows[0][k]) for k in ("seglog_samples", "reference_samples")] == [1, 1]
