"""Benchmark results: samples, medians, ratios against a reference measured in the same run.

A :class:`Row` pairs one seglog measurement with the reference it is judged against (the
raw disk, the client alone, Spark over Parquet...). Each side keeps every repeat's sample;
tables show the median of the samples and the ratio of the two medians. Units: MB is 10^6
bytes; rates are per second of wall-clock time.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

__all__ = ["Report", "Row", "Samples", "format_value", "measure", "median"]


def median(samples: Iterable[float]) -> float:
    """Median of ``samples``; NaN when there are none."""
    values = list(samples)
    return statistics.median(values) if values else math.nan


@dataclass
class Samples:
    """Repeated measurements of one rate, in ``unit`` (e.g. ``"MB/s"``, ``"msgs/s"``)."""

    unit: str
    values: list[float] = field(default_factory=list)
    error: str | None = None
    """Why the measurement could not be taken (the layer is missing, a client error...)."""

    @property
    def median(self) -> float:
        """Median of the samples; NaN when there are none (see ``error``)."""
        return median(self.values)


@dataclass
class Row:
    """One line of the benchmark table: a seglog figure next to its reference."""

    metric: str
    seglog: Samples
    reference_name: str | None = None
    reference: Samples | None = None
    target: float | None = None
    """Minimum ratio seglog / reference this issue aims at (None: informational)."""
    goal: str | None = None
    """A goal that is not a ratio, in words ("<= 0.1 s", ">= 1 M msg/s"; storage rows)."""
    goal_met: bool | None = None
    """Whether ``goal`` is met (None without one)."""

    @property
    def ratio(self) -> float | None:
        """median(seglog) / median(reference); None without a reference, NaN if undefined."""
        if self.reference is None:
            return None
        ref = self.reference.median
        value = self.seglog.median
        if math.isnan(ref) or math.isnan(value) or ref == 0:
            return math.nan
        return value / ref

    @property
    def met(self) -> bool | None:
        """Whether the ratio reaches the target; None without a target."""
        ratio = self.ratio
        if self.target is None:
            return self.goal_met if self.goal is not None else None
        if ratio is None:
            return None
        return not math.isnan(ratio) and ratio >= self.target

    @property
    def errors(self) -> list[str]:
        """Errors of either side, for the notes under the table."""
        out = [self.seglog.error] if self.seglog.error else []
        if self.reference is not None and self.reference.error:
            out.append(self.reference.error)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view: medians, samples, ratio, target, errors."""

        def num(value: float | None) -> float | None:
            return None if value is None or math.isnan(value) else value

        return {
            "metric": self.metric,
            "unit": self.seglog.unit,
            "seglog": num(self.seglog.median),
            "seglog_samples": self.seglog.values,
            "reference_name": self.reference_name,
            "reference": num(self.reference.median) if self.reference else None,
            "reference_unit": self.reference.unit if self.reference else None,
            "reference_samples": self.reference.values if self.reference else [],
            "ratio": num(self.ratio),
            "target": self.target,
            "goal": self.goal,
            "met": self.met,
            "errors": self.errors,
        }


def format_value(value: float | None, unit: str) -> str:
    """``1234567`` msgs/s → ``"1,234,567"``; MB/s keep one decimal, seconds three;
    NaN/None → ``"—"``."""
    if value is None or math.isnan(value):
        return "—"
    if unit.startswith("MB"):
        return f"{value:,.1f}"
    if unit == "s":
        return f"{value:,.3f}"
    if unit.startswith("CPU"):
        return f"{value:,.2f}"
    return f"{value:,.0f}"


def _ratio_text(row: Row) -> str:
    ratio = row.ratio
    return "—" if ratio is None or math.isnan(ratio) else f"{ratio:.2f}x"


def _target_text(row: Row) -> str:
    mark = {True: " ✓", False: " ✗", None: ""}[row.met]
    if row.target is None:
        return f"{row.goal}{mark}" if row.goal else ""
    return f">= {row.target:.2f}x{mark}"


@dataclass
class Report:
    """Every row of one run, the machine it ran on and the options used."""

    rows: list[Row]
    machine: Mapping[str, str]
    options: Mapping[str, Any]
    duration_s: float = 0.0

    @property
    def failed(self) -> list[Row]:
        """Rows where a side has no value."""
        return [r for r in self.rows if r.errors or math.isnan(r.seglog.median)]

    def _cells(self, row: Row) -> list[str]:
        ref = self.reference_cell(row)
        return [
            row.metric,
            row.seglog.unit,
            format_value(row.seglog.median, row.seglog.unit),
            ref,
            _ratio_text(row),
            _target_text(row),
        ]

    @staticmethod
    def reference_cell(row: Row) -> str:
        """``"312.4 (raw 1 MiB write+fdatasync)"`` or empty without a reference."""
        if row.reference is None:
            return ""
        return f"{format_value(row.reference.median, row.reference.unit)} ({row.reference_name})"

    def table(self, title: str = "seglog bench") -> Table:
        """A rich table: metric, unit, seglog, reference, ratio, target (medians)."""
        table = Table(title=title, show_lines=False)
        for name, justify in (
            ("metric", "left"),
            ("unit", "left"),
            ("seglog", "right"),
            ("reference (same run)", "left"),
            ("ratio", "right"),
            ("target", "left"),
        ):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in self.rows:
            table.add_row(*self._cells(row))
        return table

    def notes(self) -> list[str]:
        """One line per error, prefixed by its metric."""
        return [f"{row.metric}: {err}" for row in self.rows for err in row.errors]

    def markdown(self) -> str:
        """The table as GitHub markdown, with the machine and options below it."""
        lines = [
            "| metric | unit | seglog | reference (same run) | ratio | target |",
            "|---|---|--:|---|--:|---|",
        ]
        lines += ["| " + " | ".join(self._cells(row)) + " |" for row in self.rows]
        lines.append("")
        machine = ", ".join(f"{k}: {v}" for k, v in self.machine.items())
        lines.append(f"Machine: {machine}.")
        opts = ", ".join(f"{k}={v}" for k, v in self.options.items())
        lines.append(f"Options: {opts}. Medians of the repeats; run took {self.duration_s:.0f} s.")
        lines += [f"- {note}" for note in self.notes()]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view of the whole run."""
        return {
            "machine": dict(self.machine),
            "options": dict(self.options),
            "duration_s": self.duration_s,
            "rows": [row.to_dict() for row in self.rows],
        }

    def write_json(self, path: Path) -> None:
        """Write :meth:`to_dict` to ``path`` (UTF-8, indented)."""
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def write_markdown(self, path: Path) -> None:
        """Write :meth:`markdown` to ``path``."""
        path.write_text(self.markdown(), encoding="utf-8")


def measure(
    samples: Samples, progress: Callable[[str], None], label: str, fn: Callable[[], float]
) -> bool:
    """Append ``fn()`` to ``samples`` and report it through ``progress``; on an exception keep
    the first error in ``samples.error`` and return False (later calls are then skipped)."""
    if samples.error is not None:
        return False
    try:
        value = fn()
    except Exception as exc:  # every failure goes into the table; the run carries on
        samples.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        progress(f"{label}: FAILED {samples.error}")
        return False
    samples.values.append(value)
    progress(f"{label}: {format_value(value, samples.unit)} {samples.unit}")
    return True
