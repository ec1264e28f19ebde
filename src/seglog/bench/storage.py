"""``python -m seglog.bench.storage``: the storage engine's benchmark table (issue 3).

    python -m seglog.bench.storage --size 64M --repeat 3        # quick (~1 min)
    python -m seglog.bench.storage --size 1G --repeat 3 --json out.json

See ``seglog.bench._storage_bench`` for what each row measures and its reference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from seglog.bench._storage_bench import StorageRow, storage_bench

__all__ = ["main", "markdown", "parse_size", "table"]

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes from ``"256M"``, ``"1G"``, ``"64MiB"``, ``"4096"``; ValueError otherwise."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "msg/s":
        return f"{value / 1e6:.2f} M msg/s" if value >= 1e5 else f"{value / 1e3:.0f} k msg/s"
    return f"{value:.0f} {unit}"


def _cells(r: StorageRow) -> list[str]:
    met = "" if r.met is None else ("yes" if r.met else "NO")
    ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
    ref = f"{_fmt(r.reference, r.unit)} ({r.reference_name})" if r.reference_name else ""
    return [r.metric, _fmt(r.seglog, r.unit), ref, ratio, r.goal, met]


_HEAD = ["metric", "seglog", "reference (same run)", "ratio", "goal", "met"]


def table(rows: list[StorageRow]) -> Table:
    """A rich table of ``rows``."""
    t = Table(title="seglog storage benchmark (medians)")
    for h in _HEAD:
        t.add_column(h)
    for r in rows:
        t.add_row(*_cells(r))
    return t


def markdown(rows: list[StorageRow]) -> str:
    """The rows as a markdown table (docs/benchmarks.md)."""
    lines = ["| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; 0 when every measurement was taken."""
    ap = argparse.ArgumentParser(prog="python -m seglog.bench.storage", description=__doc__)
    ap.add_argument("--size", default="64M", help="log killed and reopened (e.g. 64M, 1G)")
    ap.add_argument("--messages", type=int, default=200_000, help="per publish/consume run")
    ap.add_argument("--compact-size", default=None, help="compacted log (default min(size, 16M))")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (medians)")
    ap.add_argument("--dir", type=Path, default=Path("."), help="where to write (temp dir inside)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    ap.add_argument("--markdown", type=Path, default=None, help="also write a markdown table")
    args = ap.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    rows = storage_bench(
        args.dir,
        size_bytes=parse_size(args.size),
        messages=args.messages,
        compact_bytes=parse_size(args.compact_size) if args.compact_size else None,
        repeat=args.repeat,
        progress=console.log,
    )
    console.print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps([r._asdict() for r in rows], indent=2))
    if args.markdown is not None:
        args.markdown.write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
