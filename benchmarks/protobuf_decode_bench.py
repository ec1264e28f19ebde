"""Protobuf values decoded into an Arrow struct column, against the record-by-record decoder,
the protobuf runtime's bare parse loop and the Avro decoder, on the same rows in one run.

Decoder alone (``seglog.columnar.TypedDecoder`` on a binary Arrow array, one thread, no
Spark), rows/s:

- the flight-like 10-field message (``seglog.bench.FLIGHT_PROTO``: ints, strings, a proto3
  ``optional`` double, a ``Timestamp``; ~56 B) through ``decode`` (vectorised from the
  wire format) against ``decode_each`` (each message parsed by upb and converted to Python
  values, then one ``pa.array``: the decoder before), against upb's bare
  ``FromString`` loop over the same bytes (no column at all), and against the Avro decoder
  (vectorised) on the same rows as Avro records (``FLIGHT_SCHEMA``);
- a nested Order message (``ORDER_PROTO``: enum, repeated nested messages, a map, a
  ``Timestamp``, a wrapper, a oneof), vectorised from the wire too, against
  ``decode_each`` and the bare parse loop;
- the same Order batch with one malformed value at its end, which ``decode`` finds by
  cutting the batch in halves (each half vectorised, the last 512 values parsed by upb then
  turned into Arrow one field at a time), against ``decode_each``.

Goal: ``decode`` >= 10x ``decode_each`` on the 10-field message. Prints ``seglog.bench``'s
markdown table of medians over ``--repeat`` rounds (runs interleaved); ``--json FILE``
writes the report.

    .venv/bin/python benchmarks/protobuf_decode_bench.py                 # 100,000 rows
    .venv/bin/python benchmarks/protobuf_decode_bench.py --rows 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from seglog.bench import (
    FLIGHT_PROTO,
    FLIGHT_SCHEMA,
    ORDER_PROTO,
    Report,
    Row,
    Samples,
    flight_avro,
    flight_protobuf,
    machine_info,
    message_class,
    order_protobuf,
    proto_layout_of,
)
from seglog.columnar import TypedDecoder

GOAL = 10.0


def _rate(rows: int, run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return rows / (time.perf_counter() - start)


def _parse_loop(cls: Any, values: list[bytes]) -> Callable[[], Any]:
    parse = cls.FromString
    return lambda: [parse(v[6:]) for v in values]


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile each decoder once")
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = range(args.rows)
    flights, orders = flight_protobuf(rows), order_protobuf(rows)
    avro_values = pa.array(flight_avro(rows), type=pa.binary())
    flight_array = pa.array(flights, type=pa.binary())
    order_array = pa.array(orders, type=pa.binary())
    broken = pa.array([*orders[:-1], b"\x00\x00\x00\x00\x01\x00\x0a\x09"], type=pa.binary())
    flight = TypedDecoder("protobuf", proto_layout_of(FLIGHT_PROTO, "bench.Flight"), lambda _: None)
    order = TypedDecoder("protobuf", proto_layout_of(ORDER_PROTO, "bench.Order"), lambda _: None)
    avro_text = json.dumps(FLIGHT_SCHEMA)
    avro = TypedDecoder("avro", avro_text, {1: avro_text}.get, reader_id=1)
    for decoder, array in ((flight, flight_array), (order, order_array), (order, broken)):
        if decoder.decode(array)[0] != decoder.decode_each(array)[0]:
            raise SystemExit("the column-wise and record-by-record columns differ")
    runs: dict[str, tuple[Samples, Callable[[], Any]]] = {
        "flight": (Samples("rows/s"), lambda: flight.decode(flight_array)),
        "flight_each": (Samples("rows/s"), lambda: flight.decode_each(flight_array)),
        "flight_parse": (
            Samples("rows/s"),
            _parse_loop(message_class(FLIGHT_PROTO, "bench.Flight"), flights),
        ),
        "avro": (Samples("rows/s"), lambda: avro.decode(avro_values)),
        "order": (Samples("rows/s"), lambda: order.decode(order_array)),
        "order_each": (Samples("rows/s"), lambda: order.decode_each(order_array)),
        "order_parse": (
            Samples("rows/s"),
            _parse_loop(message_class(ORDER_PROTO, "bench.Order"), orders),
        ),
        "broken": (Samples("rows/s"), lambda: order.decode(broken)),
        "broken_each": (Samples("rows/s"), lambda: order.decode_each(broken)),
    }
    for run in runs.values():
        run[1]()  # warm-up
    for rnd in range(args.repeat):
        order_of_runs = list(runs.items())
        if rnd % 2:
            order_of_runs.reverse()
        for name, (samples, run) in order_of_runs:
            samples.values.append(_rate(args.rows, run))
            print(f"{name} {rnd + 1}/{args.repeat}: {samples.values[-1]:,.0f} rows/s",
                  file=sys.stderr)  # fmt: skip
    if args.profile:
        for name in ("flight", "order"):
            profile = cProfile.Profile()
            profile.runcall(runs[name][1])
            print(f"--- {name}", file=sys.stderr)
            pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(8)
    s = {name: samples for name, (samples, _) in runs.items()}
    flight_metric = "Protobuf decode, 10-field flight message (vectorised from the wire)"
    order_metric = "Protobuf decode, nested Order message (vectorised from the wire)"
    broken_metric = "Protobuf decode, nested Order, one value malformed (cut in halves)"
    table = [
        Row(flight_metric, s["flight"], "record by record (decode_each)", s["flight_each"],
            target=GOAL),
        Row(flight_metric, s["flight"], "upb FromString loop alone", s["flight_parse"]),
        Row(flight_metric, s["flight"], "Avro decoder, same rows", s["avro"]),
        Row(order_metric, s["order"], "record by record (decode_each)", s["order_each"]),
        Row(order_metric, s["order"], "upb FromString loop alone", s["order_parse"]),
        Row(broken_metric, s["broken"], "record by record (decode_each)", s["broken_each"]),
    ]  # fmt: skip
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report(table, machine_info(), settings, time.perf_counter() - started)
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
