"""Registrations per second of the schema registry of ``seglog serve
--schema-registry-listen``, next to references measured in the same run:

- **registrations/s**: distinct small Avro schemas (a record of one field, a new name
  each), each under its own subject (``bench-N-value``, as producers register one per
  topic), ``POST /subjects/{s}/versions`` from ``--clients`` threads over keep-alive
  HTTP connections. Each answer waits for its ``_schemas`` record to be fsynced. Goal:
  >= 1,000/s.
- reference **trivial GETs/s**: ``GET /schemas/types`` on the same server, same clients:
  the HTTP round trip with nothing behind it (the ceiling of any endpoint).
- reference **append+fsync/s**: a seglog storage log in the same directory's file system,
  one ~200 B record batch appended and synced per call from the same number of threads
  (the registry's store cost with nothing above it).

Prints ``seglog.bench``'s markdown table of medians over ``--repeat`` runs; ``--json FILE``
writes the report (``Report.to_dict``: rows, every sample, settings).

    .venv/bin/python benchmarks/schema_registry_bench.py                # 3 repeats
    .venv/bin/python benchmarks/schema_registry_bench.py --schemas 200 --repeat 1
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import seglog
from seglog.bench import Report, Row, Samples, machine_info
from seglog.broker import free_port, start_broker

GOAL = 1000.0
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _parallel(
    clients: int, total: int, work: Callable[[int, Any], None], setup: Callable[[], Any]
) -> float:
    """Run ``work(i, state)`` for i in range(total) spread over ``clients`` threads (each
    with its own ``setup()`` state); returns calls per second."""
    barrier = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def run(first: int) -> None:
        state = setup()
        barrier.wait()
        try:
            for i in range(first, total, clients):
                work(i, state)
        except BaseException as exc:  # reported after the run
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return total / elapsed


def _connection(port: int) -> Callable[[], http.client.HTTPConnection]:
    return lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def _call(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None) -> Any:
    headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
    conn.request(method, path, body, headers)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{method} {path}: {response.status} {data!r}")
    return json.loads(data)


def _registrations(port: int, clients: int, count: int, run: int) -> float:
    def register(i: int, conn: http.client.HTTPConnection) -> None:
        schema = {"type": "record", "name": f"R{run}_{i}", "fields": [{"name": "f", "type": "int"}]}
        body = json.dumps({"schema": json.dumps(schema)}).encode()
        _call(conn, "POST", f"/subjects/bench-{run}-{i}-value/versions", body)

    return _parallel(clients, count, register, _connection(port))


def _trivial_gets(port: int, clients: int, count: int) -> float:
    return _parallel(
        clients, count, lambda _i, c: _call(c, "GET", "/schemas/types", None), _connection(port)
    )


def _append_fsync(directory: Path, clients: int, count: int) -> float:
    log = seglog.open_log(directory, create=True)
    record = json.dumps(
        {"subject": "bench-value", "version": 1, "id": 1, "schema": "x" * 120}
    ).encode()
    key = b'{"keytype":"SCHEMA","subject":"bench-value","version":1,"magic":1}'
    batch = bytes(
        seglog.storage.encode_records([record], [key], int(time.time() * 1000), None, 1 << 30)
    )

    def append(_i: int, _state: Any) -> None:
        log.append(batch)
        log.sync()

    try:
        return _parallel(clients, count, append, lambda: None)
    finally:
        log.close()


def main() -> None:
    """Start one broker with its registry, run each measure ``--repeat`` times, print
    the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", type=int, default=3000, help="registrations per run")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the table and samples here")
    args = parser.parse_args()
    started = time.perf_counter()
    samples = {
        "registrations": Samples("schemas/s"),
        "gets": Samples("requests/s"),
        "fsync": Samples("appends/s"),
    }
    with tempfile.TemporaryDirectory(prefix="seglog-registry-bench-") as tmp:
        port = free_port()
        proc = start_broker(
            Path(tmp) / "data", extra_args=["--schema-registry-listen", f"127.0.0.1:{port}"]
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    _call(_connection(port)(), "GET", "/schemas/types", None)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            for run in range(args.repeat):
                samples["registrations"].values.append(
                    _registrations(port, args.clients, args.schemas, run)
                )
                samples["gets"].values.append(_trivial_gets(port, args.clients, args.schemas))
                samples["fsync"].values.append(
                    _append_fsync(Path(tmp) / f"fsync-{run}", args.clients, args.schemas)
                )
                _log(
                    f"run {run + 1}: "
                    + ", ".join(f"{k} {v.values[-1]:,.0f}/s" for k, v in samples.items())
                )
        finally:
            assert proc.stop() == 0, proc.log_text()
    reg = samples["registrations"]
    metric = f"registrations/s, distinct small Avro schemas, {args.clients} clients"
    goal = f">= {GOAL:,.0f}/s"
    rows = [
        Row(metric, reg, "trivial GET /schemas/types, same server", samples["gets"],
            goal=goal, goal_met=reg.median >= GOAL),
        Row(metric, reg, "storage append+fsync, same threads", samples["fsync"],
            goal=goal, goal_met=reg.median >= GOAL),
    ]  # fmt: skip
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report(rows, machine_info(), settings, time.perf_counter() - started)
    print(f"\nschema registry, medians of {args.repeat} run(s), {args.schemas} schemas each\n")
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
