"""``python -m examples.pipelines``: run the pipeline library and check it against pandas.

Exit status 0 when every result equals its pandas computation, 1 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table


def _same(actual: pd.DataFrame, expected: pd.DataFrame, means: list[str]) -> bool:
    keys = [c for c in expected.columns if c not in means]
    if len(actual) != len(expected) or not actual[keys].equals(expected[keys]):
        return False
    return all(
        np.allclose(actual[m].to_numpy(), expected[m].to_numpy(), rtol=0, atol=1e-9, equal_nan=True)
        for m in means
    )


def main(argv: list[str] | None = None) -> int:
    """Run; print one line per pipeline; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m examples.pipelines")
    parser.add_argument("--work-dir", type=Path, default=Path("data/pipelines"))
    parser.add_argument("--chart", type=Path, default=Path("out/delay_by_hour.png"))
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    from examples.pipelines.run import main as run  # noqa: PLC0415 - imports pyspark

    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    results = run(args.work_dir, args.chart, master=args.master)
    mean = ["mean_dep_delay_min"]
    checks = [
        ("event-time windows (watermark 2 h)", results.windows, results.windows_expected, []),
        ("  … after 1000 late records", results.windows_after_late, results.windows_expected, []),
        ("flights ⋈ weather ⋈ airports", results.weather, results.weather_expected, mean),
        ("flights ⋈ planes changelog", results.planes, results.planes_expected, mean),
        ("delay by hour and carrier", results.delay_by_hour, results.delay_by_hour_expected, mean),
    ]
    table = Table("pipeline", "rows", "equals pandas")
    ok = True
    for name, actual, expected, means in checks:
        same = _same(actual, expected, means)
        ok &= same
        table.add_row(name, f"{len(actual):,}", "yes" if same else "[red]NO[/]")
    console = Console()
    console.print(table)
    console.print(f"late records dropped by the watermark: {results.windows_dropped}")
    console.print(f"chart: {results.chart}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
