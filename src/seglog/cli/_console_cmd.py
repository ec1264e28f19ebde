"""``seglog console``: the web console against any Kafka-protocol broker."""

from __future__ import annotations

from typing import Annotated

import typer

from seglog.cli._client import ClientOptions, client_command, fail

__all__ = ["register"]


@client_command
def console(
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT of the web console.")
    ] = "127.0.0.1:8080",
    schema_registry_url: Annotated[
        str | None,
        typer.Option(
            "--schema-registry-url",
            envvar="SCHEMA_REGISTRY_URL",
            help="A schema registry whose subjects the Schemas page lists.",
        ),
    ] = None,
    *,
    client: ClientOptions,
) -> None:
    """Serve the web console (read-only) for the brokers of -b until Ctrl-C."""
    try:
        from seglog.console import serve_console  # noqa: PLC0415
    except ImportError as exc:
        raise fail(f"the console needs: pip install 'seglog[console]' ({exc})", 2) from None
    from seglog.broker import split_host_port  # noqa: PLC0415 - keeps start-up light

    try:
        host, port = split_host_port(listen, 8080)
    except ValueError as exc:
        raise fail(f"--listen {listen!r}: {exc}", 2) from None
    typer.echo(
        f"seglog console on http://{host}:{port}/ for {client.config()['bootstrap.servers']}"
    )
    serve_console(client.config(), host, port, schema_registry_url=schema_registry_url)


def register(app: typer.Typer) -> None:
    """Add ``console`` to ``app``."""
    app.command("console")(console)
