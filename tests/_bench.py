"""The one harness of the benchmark smoke tests (``tests/test_*_bench.py``): run a script of
``benchmarks/`` in its tiny mode as a subprocess, with ``--json``, and check its rows.

Speed is never asserted: only that each row holds finite positive numbers and is printed in
the Markdown table the script writes to stdout. Scripts that report through
``seglog.bench.Report`` are checked with :meth:`BenchRun.check_report` (its table's columns,
the ratio of every row)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
REPORT_COLUMNS = ["metric", "unit", "seglog", "reference (same run)", "ratio", "target"]
"""The columns of ``seglog.bench.Report.markdown``."""


@dataclass(frozen=True)
class BenchRun:
    """One finished run: the script's stdout and its ``--json`` document."""

    stdout: str
    doc: dict[str, Any]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The document's rows, in the table's order."""
        rows: list[dict[str, Any]] = self.doc["rows"]
        return rows

    def column(self, key: str) -> list[Any]:
        """``row[key]`` of every row."""
        return [row[key] for row in self.rows]

    def table(self) -> list[str]:
        """The Markdown table's lines in stdout (header included, separator not)."""
        return [line for line in self.stdout.splitlines() if line.startswith("| ")]

    def check_rows(self, *keys: str, met: bool = False) -> None:
        """Each row's ``keys`` are finite and > 0, its ``met`` is a bool when ``met``, and
        its metric is printed as a table row."""
        for row in self.rows:
            for key in keys:
                assert math.isfinite(row[key]), row
                assert row[key] > 0, row
            if met:
                assert row["met"] in (True, False), row
            assert f"| {row['metric']} |" in self.stdout

    def report_table(self) -> list[dict[str, str]]:
        """The ``Report.markdown`` table's rows in stdout, as {column: cell}; asserts its
        header is the Report's (every column there, the ratio's included)."""
        header, *rows = self.table()

        def cells(line: str) -> list[str]:  # "| a | b |  |": an empty last cell stays
            assert line.endswith(" |"), line
            return [c.strip() for c in line[2:-2].split(" | ")]

        columns = cells(header)
        assert columns == REPORT_COLUMNS, header
        return [dict(zip(columns, cells(line), strict=True)) for line in rows]

    def check_report(self, *, met: bool = False) -> None:
        """A ``seglog.bench.Report`` run: each ``--json`` row has finite positive
        ``seglog`` and ``reference`` medians and samples of both, a ``ratio`` equal to
        their quotient, ``met`` a bool when ``met``; the table prints every row, in order,
        with that ratio."""
        printed = self.report_table()
        assert [p["metric"] for p in printed] == self.column("metric")
        for row, cells in zip(self.rows, printed, strict=True):
            for key in ("seglog", "reference", "ratio"):
                assert isinstance(row[key], float), row
                assert math.isfinite(row[key]), row
                assert row[key] > 0, row
            assert row["seglog_samples"], row
            assert row["reference_samples"], row
            assert math.isclose(row["ratio"], row["seglog"] / row["reference"]), row
            assert cells["ratio"] == f"{row['ratio']:.2f}x", cells
            assert cells["reference (same run)"].endswith(f"({row['reference_name']})"), cells
            if met:
                assert row["met"] in (True, False), row
                assert cells["target"].endswith(("✓", "✗")), cells


def run_bench(script: str, tmp_path: Path, *args: str, timeout: float = 300) -> BenchRun:
    """Run ``benchmarks/<script>`` with ``args`` and ``--json <tmp_path>/bench.json``;
    asserts it exits 0 (its last output as the message)."""
    out = tmp_path / "bench.json"
    command = [sys.executable, str(BENCHMARKS / script), *args, "--json", str(out)]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return BenchRun(result.stdout, json.loads(out.read_text()))
