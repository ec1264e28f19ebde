"""Run the library's pipelines end to end and check each against pandas.

Phases: start ``seglog serve`` → load ``flights-by-time`` (flights in scheduled-time order,
one partition) and the ``planes`` changelog (compacted topic) → the windowed query, then
late records and the query again from its checkpoint → the weather join → the planes join
→ the delay chart. Each result is compared with its pandas computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import SparkSession

from examples.flights.broker import running_broker
from examples.flights.data import FLIGHTS_ROWS, airline_names
from examples.flights.load import create_topic, load_records
from examples.pipelines import chart, planes, weather, windows
from examples.pipelines.tables import airports_frame, flights_by_time, flights_frame, weather_frame

__all__ = ["LATE_RECORDS", "PipelineResults", "load_inputs", "produce_late_records", "run_all"]

LATE_RECORDS = 1000
"""Flights of the first days re-sent after the whole year: older than the watermark."""


@dataclass
class PipelineResults:
    """Each pipeline's output, its pandas reference, and the windowed query's progress."""

    windows: pd.DataFrame
    windows_expected: pd.DataFrame
    windows_dropped: int  # numRowsDroppedByWatermark over the run after the late records
    windows_after_late: pd.DataFrame
    weather: pd.DataFrame
    weather_expected: pd.DataFrame
    planes: pd.DataFrame
    planes_expected: pd.DataFrame
    delay_by_hour: pd.DataFrame
    delay_by_hour_expected: pd.DataFrame
    chart: Path


def load_inputs(bootstrap: str) -> None:
    """Create and fill topics ``flights-by-time`` and ``planes``."""
    create_topic(bootstrap, windows.SOURCE_TOPIC, 1)
    load_records(bootstrap, windows.SOURCE_TOPIC, flights_by_time(), expected=FLIGHTS_ROWS)
    create_topic(bootstrap, planes.PLANES_TOPIC, 1, config={"cleanup.policy": "compact"})
    records = list(planes.changelog_records())
    load_records(bootstrap, planes.PLANES_TOPIC, records, expected=len(records))


def produce_late_records(bootstrap: str) -> int:
    """Re-send the first ``LATE_RECORDS`` flights of the year (event time long past)."""
    first = []
    for record in flights_by_time():
        first.append(record)
        if len(first) == LATE_RECORDS:
            break
    load_records(bootstrap, windows.SOURCE_TOPIC, first, expected=LATE_RECORDS)
    return LATE_RECORDS


def _dropped(progress: list[dict[str, object]]) -> int:
    total = 0
    for raw in progress:
        for operator in raw.get("stateOperators", []) or []:  # type: ignore[union-attr]
            total += int(operator.get("numRowsDroppedByWatermark", 0))
    return total


def run_all(spark: SparkSession, bootstrap: str, work: Path, chart_path: Path) -> PipelineResults:
    """Run every pipeline against a broker whose inputs :func:`load_inputs` loaded."""
    flights = flights_frame()
    windows_out, windows_checkpoint = work / "windows", work / "windows-checkpoint"
    windows.run_windows(spark, bootstrap=bootstrap, out=windows_out, checkpoint=windows_checkpoint)
    first_windows = windows.read_windows(windows_out)
    weather_table = weather.run_weather(
        spark, bootstrap=bootstrap, out=work / "weather", checkpoint=work / "weather-checkpoint"
    )
    planes_table = planes.delay_by_manufacturer(spark, bootstrap, work / "planes")
    by_hour = chart.delay_by_hour_and_carrier(spark, bootstrap)
    # last, as they change topic flights-by-time: late records, and the windows again
    produce_late_records(bootstrap)
    progress = windows.run_windows(
        spark, bootstrap=bootstrap, out=windows_out, checkpoint=windows_checkpoint
    )
    return PipelineResults(
        windows=first_windows,
        windows_expected=windows.reference_windows(flights),
        windows_dropped=_dropped(progress),
        windows_after_late=windows.read_windows(windows_out),
        weather=weather_table,
        weather_expected=weather.reference_weather(flights, weather_frame(), airports_frame()),
        planes=planes_table,
        planes_expected=planes.reference_planes(flights),
        delay_by_hour=by_hour,
        delay_by_hour_expected=chart.reference_delay_by_hour(flights),
        chart=chart.plot_delay_by_hour(by_hour, chart_path, airline_names()),
    )


def main(work: Path, chart_path: Path, master: str = "local[2]") -> PipelineResults:
    """Start a broker under ``work``, load, run everything; stop the broker and Spark."""
    from examples.flights.pipeline import make_spark_session  # noqa: PLC0415

    work.mkdir(parents=True, exist_ok=True)
    with running_broker(work / "broker", work / "broker.log") as bootstrap:
        load_inputs(bootstrap)
        spark = make_spark_session("seglog-pipelines", master=master)
        try:
            return run_all(spark, bootstrap, work, chart_path)
        finally:
            spark.stop()
