"""``seglog consume TOPIC``: records from any Kafka-protocol broker to stdout (kcat's
``-C``). What it does (offsets, output formats) is ``_consume.consume_records``; this
module declares the typer command (help, usage errors). ``seglog consume ...`` itself
usually starts through ``_consume.run_fast``, which parses the same options with argparse
and falls back to this command for ``--help`` and anything it does not accept."""

from __future__ import annotations

from typing import Annotated

import typer

from seglog.cli._client import ClientOptions, client_command
from seglog.cli._consume import consume_records

__all__ = ["register"]


@client_command
def consume(  # noqa: PLR0917 (one loop, kcat's options)
    topic: Annotated[str, typer.Argument(help="Topic to consume.")],
    offset: Annotated[
        str, typer.Option("-o", "--offset", help="beginning|end|stored|N|-N|@TIMESTAMP_MS")
    ] = "beginning",
    partitions: Annotated[
        list[int] | None, typer.Option("-p", "--partition", help="Partition(s), repeatable.")
    ] = None,
    count: Annotated[
        int | None, typer.Option("-c", "--count", help="Exit after N records.")
    ] = None,
    exit_at_end: Annotated[
        bool, typer.Option("-e", "--exit", help="Exit when every partition is at its end.")
    ] = False,
    group: Annotated[
        str | None, typer.Option("-G", "--group", help="Consume as a member of this group.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("-f", "--format", help="Output format (kcat's %-letters).")
    ] = "%v\\n",
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per record.")] = False,
    value_format: Annotated[
        str,
        typer.Option("--value-format", help="binary, or avro: decode by schema id, print as JSON."),
    ] = "binary",
    schema_registry_url: Annotated[
        str | None,
        typer.Option("--schema-registry-url", help="Schema registry (default: the broker's own)."),
    ] = None,
    *,
    client: ClientOptions,
) -> None:
    """Consume records and print them (value per line by default)."""
    consume_records(
        topic, offset, partitions, count, exit_at_end, group, fmt, json_out, value_format,
        schema_registry_url, client,
    )  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``consume`` to ``app``."""
    app.command("consume")(consume)
