"""``seglog produce TOPIC``: records from stdin or files to any Kafka-protocol broker
(kcat's ``-P``). What it does is ``_produce.produce_records``; this module declares the
typer command (help, usage errors). ``seglog produce ...`` itself usually starts through
``_produce.run_fast``, which parses the same options with argparse and falls back to this
command for ``--help`` and anything it does not accept."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from seglog.cli._client import ClientOptions, client_command
from seglog.cli._produce import produce_records

__all__ = ["register"]


@client_command
def produce(  # noqa: PLR0917 (typer maps each parameter to an option)
    topic: Annotated[str, typer.Argument(help="Topic to produce to.")],
    files: Annotated[
        list[Path] | None, typer.Argument(help="Files to read (default: stdin).")
    ] = None,
    key: Annotated[str | None, typer.Option("-k", "--key", help="Key of every record.")] = None,
    key_delimiter: Annotated[
        str | None,
        typer.Option("-K", help="Split each input record into key and value at this delimiter."),
    ] = None,
    delimiter: Annotated[
        str, typer.Option("-D", "--delimiter", help="Record delimiter (escapes like \\n, \\0).")
    ] = "\\n",
    header: Annotated[
        list[str] | None, typer.Option("-H", "--header", help="Header key=value, repeatable.")
    ] = None,
    partition: Annotated[
        int | None, typer.Option("-p", "--partition", help="Partition (default: partitioner).")
    ] = None,
    compression: Annotated[
        str,
        typer.Option(
            "-z", "--compression", help="compression.type: none, gzip, snappy, lz4, zstd."
        ),
    ] = "none",
    acks: Annotated[
        str,
        typer.Option(
            "--acks",
            help="acks: 0, 1 or all. Not idempotent (as kcat): -X enable.idempotence=true.",
        ),
    ] = "all",
    json_input: Annotated[
        bool,
        typer.Option("--json-input", help="Input is JSON lines {key, value, headers, partition}."),
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print each delivered record's partition and offset.")
    ] = False,
    value_format: Annotated[
        str,
        typer.Option(
            "--value-format",
            help="binary, or avro: values are JSON, written as Avro of --value-schema.",
        ),
    ] = "binary",
    value_schema: Annotated[
        Path | None,
        typer.Option("--value-schema", help="Avro schema file (registered under <topic>-value)."),
    ] = None,
    schema_registry_url: Annotated[
        str | None,
        typer.Option("--schema-registry-url", help="Schema registry (default: the broker's own)."),
    ] = None,
    *,
    client: ClientOptions,
) -> None:
    """Produce records from stdin or files (one per line by default)."""
    produce_records(
        topic, files, key, key_delimiter, delimiter, header, partition, compression, acks,
        json_input, json_out, value_format, value_schema, schema_registry_url, client,
    )  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``produce`` to ``app``."""
    app.command("produce")(produce)
