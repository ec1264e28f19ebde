"""The demo's console report: totals, worst groups, carriers and hours, phase timings.

Everything here is computed from the pipeline's result table (columns
:data:`examples.flights.data.RESULT_COLUMNS`); roll-ups weight each group's mean by its
departed flights, so they equal the mean over the underlying flights.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from examples.flights.data import GROUP_COLUMNS, RESULT_COLUMNS

__all__ = ["MIN_GROUP_FLIGHTS", "print_summary", "rollup", "table_differences", "totals"]

MIN_GROUP_FLIGHTS = 50
"""A (origin, carrier, hour) group is ranked only with at least this many flights."""


def rollup(table: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Aggregate result rows by ``by``: flights, cancelled, late_departures summed;
    mean_dep_delay_min and share_late recomputed over the departed flights."""
    frame = table.assign(
        departed=table["flights"] - table["cancelled"],
        delay_sum=table["mean_dep_delay_min"].fillna(0.0) * (table["flights"] - table["cancelled"]),
    )
    sums = frame.groupby(list(by), sort=True)[
        ["flights", "cancelled", "late_departures", "departed", "delay_sum"]
    ].sum()
    departed = sums["departed"].where(sums["departed"] > 0)
    sums["mean_dep_delay_min"] = sums["delay_sum"] / departed
    sums["share_late"] = sums["late_departures"] / departed
    return sums.drop(columns=["delay_sum"]).reset_index()


def totals(table: pd.DataFrame) -> dict[str, float]:
    """Whole-data-set figures: flights, departed, cancelled, late_departures (counts),
    mean_dep_delay_min (minutes) and share_late (0..1, of departed flights)."""
    row = rollup(table.assign(all=0), ["all"]).iloc[0]
    return {
        name: float(row[name])
        for name in (
            "flights", "departed", "cancelled", "late_departures", "mean_dep_delay_min",
            "share_late",
        )
    }  # fmt: skip


def table_differences(
    actual: pd.DataFrame, expected: pd.DataFrame, tolerance: float = 1e-9
) -> list[str]:
    """Human-readable differences between two result tables ([] when they agree).

    Both tables are matched on the key; counts must be equal, means and shares within
    ``tolerance`` (absolute), nulls in the same places.
    """
    merged = expected.merge(
        actual, on=list(GROUP_COLUMNS), how="outer", suffixes=("_expected", "_actual"),
        indicator=True,
    )  # fmt: skip
    problems = [
        f"group {tuple(row[c] for c in GROUP_COLUMNS)} only in {row['_merge']}"
        for _, row in merged[merged["_merge"] != "both"].iterrows()
    ]
    both = merged[merged["_merge"] == "both"]
    for name in RESULT_COLUMNS[len(GROUP_COLUMNS) :]:
        for _, row in both.iterrows():
            want, got = row[f"{name}_expected"], row[f"{name}_actual"]
            if _same(want, got, exact=name in ("flights", "cancelled", "late_departures"),
                     tolerance=tolerance):  # fmt: skip
                continue
            key = tuple(row[c] for c in GROUP_COLUMNS)
            problems.append(f"{key} {name}: expected {want!r}, got {got!r}")
    return problems


def _same(want: object, got: object, *, exact: bool, tolerance: float) -> bool:
    want_missing, got_missing = _missing(want), _missing(got)
    if want_missing or got_missing:
        return want_missing and got_missing
    if not isinstance(want, numbers.Real) or not isinstance(got, numbers.Real):
        return want == got
    if exact:  # counts: exact in float64 below 2**53
        return float(want) == float(got)
    return math.isclose(float(want), float(got), rel_tol=0.0, abs_tol=tolerance)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _minutes(value: float) -> str:
    return "—" if pd.isna(value) else f"{value:,.1f} min"


def _share(value: float) -> str:
    return "—" if pd.isna(value) else f"{value:.1%}"


def _airline(carrier: str, airlines: Mapping[str, str]) -> str:
    name = airlines.get(carrier, "")
    for suffix in (" Inc.", " Co.", " Corporation"):
        name = name.removesuffix(suffix)
    return f"{carrier} {name}".rstrip()


def _ranked(title: str, frame: pd.DataFrame, label_columns: Mapping[str, str]) -> Table:
    table = Table(
        title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
        pad_edge=False, collapse_padding=True,
    )  # fmt: skip
    for name, header in label_columns.items():
        if name == "airline":
            table.add_column(header, no_wrap=True, overflow="ellipsis", max_width=26)
        else:
            table.add_column(header, no_wrap=True)
    for header in ("flights", "cancelled", "mean delay", "late >15"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in frame.to_dict("records"):
        table.add_row(
            *(str(row[c]) for c in label_columns),
            f"{int(row['flights']):,}",
            f"{int(row['cancelled']):,}",
            _minutes(row["mean_dep_delay_min"]),
            _share(row["share_late"]),
        )
    return table


def print_summary(
    console: Console,
    table: pd.DataFrame,
    *,
    airlines: Mapping[str, str],
    phases: Sequence[tuple[str, float]],
    top: int = 10,
) -> None:
    """Print the report of one run: totals, the ``top`` worst groups (≥ 50 flights) by
    mean departure delay, the worst carriers, the worst hours, airports, and the elapsed
    seconds of each phase."""
    figures = totals(table)
    console.rule("[bold]NYC flights 2013: departure delays")
    console.print(
        f"[bold]{int(figures['flights']):,}[/] flights in {len(table)} "
        f"(origin, carrier, hour) groups · {int(figures['cancelled']):,} cancelled "
        f"({figures['cancelled'] / figures['flights']:.1%}) · mean departure delay "
        f"[bold]{figures['mean_dep_delay_min']:.2f} min[/] · "
        f"[bold]{figures['share_late']:.1%}[/] of departures more than 15 min late"
    )
    worst = (
        table[table["flights"] >= MIN_GROUP_FLIGHTS]
        .sort_values("mean_dep_delay_min", ascending=False)
        .head(top)
    )
    console.print(
        _ranked(
            f"Worst (origin, carrier, hour) by mean delay, ≥ {MIN_GROUP_FLIGHTS} flights",
            worst.assign(airline=worst["carrier"].map(lambda c: _airline(c, airlines))),
            {"origin": "origin", "hour": "hour", "airline": "carrier"},
        )
    )
    carriers = rollup(table, ["carrier"])
    carriers = carriers.assign(airline=carriers["carrier"].map(lambda c: _airline(c, airlines)))
    console.print(
        _ranked(
            "Worst carriers",
            carriers.sort_values("mean_dep_delay_min", ascending=False).head(5),
            {"airline": "carrier"},
        )
    )
    hours = rollup(table, ["hour"]).sort_values("mean_dep_delay_min", ascending=False)
    console.print(_ranked("Worst hours of scheduled departure", hours.head(5), {"hour": "hour"}))
    console.print(_ranked("By airport", rollup(table, ["origin"]), {"origin": "origin"}))
    timing = Table(
        title="Elapsed time", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD,
        pad_edge=False, collapse_padding=True,
    )  # fmt: skip
    timing.add_column("phase")
    timing.add_column("seconds", justify="right")
    for name, seconds in phases:
        timing.add_row(name, f"{seconds:.1f}")
    timing.add_row("[bold]total", f"[bold]{sum(s for _, s in phases):.1f}")
    console.print(timing)
