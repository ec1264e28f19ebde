"""The demo's phases, in order, with the console output (``python -m examples.flights``).

Run state lives in one work directory (default ``data/demo``), wiped at the start of each
run so a rerun gives the same result: ``broker/`` (the broker's data directory),
``checkpoint/`` (the streaming query's), ``broker.log``. A directory is wiped only if it
is empty or carries the marker file this demo writes; nothing outside it is touched
except the Parquet output directory, which Spark overwrites.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from pyspark.errors import PySparkException
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from examples.flights.broker import BrokerError, running_broker
from examples.flights.changelog import ChangelogError, consume_topic, latest_per_key
from examples.flights.data import (
    FLIGHTS_ROWS,
    airline_names,
    flights_csv_path,
    iter_flight_avro,
    reference_delays,
)
from examples.flights.load import (
    LoadError,
    create_topic,
    load_records,
    register_flight_schema,
    schema_registry_url,
)
from examples.flights.pipeline import (
    DELAYS_TOPIC,
    FLIGHTS_TOPIC,
    BatchProgress,
    make_spark_session,
    normalize,
    run_pipeline,
)
from examples.flights.summary import print_summary, table_differences

__all__ = ["MARKER", "DemoError", "prepare_work_dir", "run_demo"]

MARKER = ".seglog-flights-demo"
"""File marking a work directory as this demo's (so it may be wiped)."""


class DemoError(RuntimeError):
    """A phase of the demo failed; the message says which and why."""


def prepare_work_dir(work_dir: Path) -> None:
    """Wipe ``work_dir`` and recreate it with the marker file.

    Raises DemoError if it exists, is not empty and has no marker (not this demo's).
    """
    if work_dir.exists():
        if any(work_dir.iterdir()) and not (work_dir / MARKER).is_file():
            raise DemoError(f"refusing to wipe {work_dir}: not empty and not made by this demo")
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    (work_dir / MARKER).write_text("run state of python -m examples.flights; safe to delete\n")


class _Phases:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.elapsed: list[tuple[str, float]] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.console.print(f"[bold cyan]▶ {name}[/]")
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            self.elapsed.append((name, seconds))
            self.console.print(f"  [dim]{name}: {seconds:.1f} s[/]")


def run_demo(
    *,
    work_dir: Path,
    parquet_path: Path,
    partitions: int = 3,
    max_offsets_per_trigger: int = 100_000,
    console: Console | None = None,
    master: str = "local[2]",
    source: str = "path",
) -> None:
    """Run every phase and print the summary. Raises DemoError on failure; the broker is
    stopped in every case."""
    console = console or Console()
    phases = _Phases(console)
    csv_path = flights_csv_path()
    prepare_work_dir(work_dir)
    broker_dir = work_dir / "broker"
    try:
        with ExitStack() as running:  # closed in reverse: Spark stops, then the broker
            with phases.phase("start seglog serve"):
                bootstrap = running.enter_context(
                    running_broker(broker_dir, work_dir / "broker.log", schema_registry=True)
                )
                registry = schema_registry_url(bootstrap)
                console.print(
                    f"  listening on {bootstrap}, schema registry {registry}; data directory "
                    f"{broker_dir}, log {work_dir / 'broker.log'}"
                )
            with phases.phase(f"load {csv_path.name} into topic {FLIGHTS_TOPIC!r}"):
                create_topic(bootstrap, FLIGHTS_TOPIC, partitions)
                create_topic(bootstrap, DELAYS_TOPIC, 1)  # small changelog: one partition
                schema_id = register_flight_schema(registry)
                console.print(f"  Avro schema {FLIGHTS_TOPIC}-value registered: id {schema_id}")
                _load(console, bootstrap, schema_id)
            with phases.phase(f"start Spark ({master})"):
                spark = make_spark_session(master=master)
                running.callback(spark.stop)
            with phases.phase(f"streaming pipeline {FLIGHTS_TOPIC} → {DELAYS_TOPIC} ({source})"):
                table = run_pipeline(
                    spark,
                    source_path=broker_dir,
                    bootstrap=bootstrap,
                    parquet_path=parquet_path,
                    checkpoint_dir=work_dir / "checkpoint",
                    max_offsets_per_trigger=max_offsets_per_trigger,
                    on_batch=lambda b: _print_batch(console, b),
                    source=source,
                )
            with phases.phase(f"check Parquet and topic {DELAYS_TOPIC!r} against pandas"):
                expected = reference_delays()
                topic_table = normalize(latest_per_key(consume_topic(bootstrap, DELAYS_TOPIC)))
                _check(console, "Parquet", table_differences(table, expected))
                _check(console, DELAYS_TOPIC, table_differences(topic_table, expected))
                console.print(
                    f"  {len(expected)} groups: Parquet {parquet_path} and the latest "
                    f"record per key of {DELAYS_TOPIC!r} equal the pandas computation"
                )
            with phases.phase("stop Spark and seglog serve"):
                running.close()
    except (BrokerError, LoadError, ChangelogError, PySparkException) as exc:
        raise DemoError(str(exc)) from exc
    print_summary(console, table, airlines=airline_names(), phases=phases.elapsed)


def _load(console: Console, bootstrap: str, schema_id: int) -> None:
    columns = (
        TextColumn("  {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("records acknowledged", total=FLIGHTS_ROWS, rate="")
        start = time.perf_counter()

        def on_progress(delivered: int) -> None:
            rate = delivered / max(time.perf_counter() - start, 1e-6)
            progress.update(task, completed=delivered, rate=f"{rate:,.0f} rec/s")

        result = load_records(
            bootstrap, FLIGHTS_TOPIC, iter_flight_avro(schema_id), expected=FLIGHTS_ROWS,
            on_progress=on_progress,
        )  # fmt: skip
    console.print(
        f"  {result.delivered:,} records ({result.bytes / 1e6:,.1f} MB of Avro) acknowledged "
        f"in {result.elapsed_s:.1f} s ({result.delivered / result.elapsed_s:,.0f} rec/s)"
    )


def _print_batch(console: Console, batch: BatchProgress) -> None:
    console.print(
        f"  micro-batch {batch.batch_id}: {batch.input_rows:,} records "
        f"({batch.total_rows:,}/{FLIGHTS_ROWS:,}) in {batch.duration_ms / 1000:.1f} s, "
        f"{batch.rows_per_second:,.0f} rec/s"
    )


def _check(console: Console, what: str, problems: list[str]) -> None:
    if problems:
        for line in problems[:10]:
            console.print(f"  [red]{line}[/]")
        raise DemoError(f"{what} differs from the pandas computation in {len(problems)} places")
