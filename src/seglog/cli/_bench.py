"""``seglog bench``: throughput of every layer next to references measured in the same run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["register"]


def bench(  # noqa: PLR0917 (typer maps each parameter to a CLI option)
    messages: Annotated[
        int | None,
        typer.Option(
            "--messages",
            min=1,
            help="Messages per produce/fetch/embedded run [default: 300000; --quick: 2000].",
        ),
    ] = None,
    spark_rows: Annotated[
        int | None,
        typer.Option(
            "--spark-rows",
            min=1,
            help="Records of the Spark data set [default: 1000000; --quick: 5000].",
        ),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat", min=1, help="Runs per measurement, medians shown [default: 3; --quick: 1]."
        ),
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Tiny sizes, one repeat (a smoke test, not a figure).")
    ] = False,
    skip_spark: Annotated[bool, typer.Option("--skip-spark", help="Leave out Spark.")] = False,
    skip_storage: Annotated[
        bool, typer.Option("--skip-storage", help="Leave out the storage engine section.")
    ] = False,
    storage_size: Annotated[
        str | None,
        typer.Option(
            "--storage-size",
            help="Log the storage section kills and reopens, e.g. 256M, 1G "
            "(default 256M; --quick: 2M).",
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Where the bench writes (a temporary directory inside it, removed at the "
            "end). Default: the current directory, so the raw disk reference measures the "
            "disk your data lives on.",
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the results as JSON here.")
    ] = None,
    markdown_path: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the table as markdown here.")
    ] = None,
) -> None:
    """Measure produce/fetch through `seglog serve`, embedded publish/consume, Spark reads and
    the storage engine (publish/consume, open after kill -9, compaction), each next to a
    reference measured in the same run (raw disk, client only, Parquet, JSON, file copy).

    Exits 1 if any measurement failed (the table says which and why).
    """
    try:
        # the bench needs the clients of the spark/dev extras; seglog's other commands do not
        from seglog.bench import BenchOptions, run_bench  # noqa: PLC0415
    except ImportError as exc:
        typer.echo(f"error: {exc}; install the extras: pip install 'seglog[spark,dev]'", err=True)
        raise typer.Exit(2) from exc

    from seglog.bench.storage import parse_size  # noqa: PLC0415  (with the bench import)

    try:
        size = parse_size(storage_size) if storage_size is not None else None
    except ValueError as exc:
        raise typer.BadParameter(f"--storage-size {storage_size!r}: {exc}") from exc
    if size is not None and size < 1 << 20:
        raise typer.BadParameter("--storage-size must be at least 1M")
    base = BenchOptions.quick() if quick else BenchOptions()
    opts = BenchOptions(
        messages=messages or base.messages,
        spark_rows=spark_rows or base.spark_rows,
        repeat=repeat or base.repeat,
        skip_spark=skip_spark,
        data_dir=data_dir,
        skip_storage=skip_storage,
        storage_size=size or base.storage_size,
        storage_compact=base.storage_compact,
    )
    # a table wider than 80 columns reads better in logs than a wrapped one
    console = Console(width=None if sys.stdout.isatty() else 150)
    with console.status("seglog bench: starting") as status:

        def progress(line: str) -> None:
            status.update(f"seglog bench: {line}")
            console.log(line)

        report = run_bench(opts, progress)
    console.print(report.table())
    for note in report.notes():
        console.print(f"[red]error[/red] {note}", highlight=False)
    console.print(
        "Medians of the repeats; ratio = median(seglog) / median(reference); MB = 10^6 bytes; "
        f"run took {report.duration_s:.0f} s.",
        highlight=False,
    )
    if json_path is not None:
        report.write_json(json_path)
    if markdown_path is not None:
        report.write_markdown(markdown_path)
    if report.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to ``app``."""
    app.command("bench")(bench)
