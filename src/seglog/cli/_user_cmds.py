"""``seglog user add|delete|list``: SCRAM users of a broker's data directory.

They edit ``<data-dir>/scram-credentials.json`` (salted, iterated SCRAM credentials; no
password is stored), which a running broker reloads when it changes, so users can be added
before the first start and while the broker runs. The password comes from
``--password``, ``$SEGLOG_SASL_PASSWORD`` or a prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from seglog.broker import CredentialStore
from seglog.cli._client import JsonOut, fail, print_json

__all__ = ["register"]

app = typer.Typer(help="SCRAM users of a broker's data directory (SASL).", no_args_is_help=True)
_DataDir = Annotated[Path, typer.Option("--data-dir", help="The broker's data directory.")]
_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@app.command("add")
def add(
    user: Annotated[str, typer.Argument(help="User name (principal User:NAME).")],
    data_dir: _DataDir = Path("data"),
    password: Annotated[
        str,
        typer.Option(
            "--password",
            envvar="SEGLOG_SASL_PASSWORD",
            prompt=True,
            hide_input=True,
            confirmation_prompt=True,
            help="Password (or $SEGLOG_SASL_PASSWORD, or a prompt).",
        ),
    ] = "",
    mechanism: Annotated[
        list[str] | None,
        typer.Option("--mechanism", help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (default both)."),
    ] = None,
    iterations: Annotated[
        int, typer.Option("--iterations", help="PBKDF2 iterations (>= 4096).")
    ] = 8192,
) -> None:
    """Create or replace a user's SCRAM credentials (PLAIN checks against them too)."""
    mechanisms = tuple(m.upper() for m in mechanism) if mechanism else _MECHANISMS
    try:
        CredentialStore(data_dir).set_password(user, password, mechanisms, iterations)
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    Console().print(f"user {user}: {', '.join(mechanisms)} credentials stored in {data_dir}")


@app.command("delete")
def delete(
    user: Annotated[str, typer.Argument(help="User name.")],
    data_dir: _DataDir = Path("data"),
) -> None:
    """Remove a user's credentials (exit 1 if it had none)."""
    if not CredentialStore(data_dir).delete(user):
        raise fail(f"no user {user!r} in {data_dir}")
    Console().print(f"user {user} deleted")


@app.command("list")
def list_users(data_dir: _DataDir = Path("data"), json_out: JsonOut = False) -> None:
    """Users and their mechanisms."""
    users = CredentialStore(data_dir).users()
    if json_out:
        print_json(users)
        return
    table = Table(title=f"users of {data_dir}")
    table.add_column("user")
    table.add_column("mechanisms")
    for name, mechs in users.items():
        table.add_row(name, ", ".join(mechs))
    Console().print(table)


def register(root: typer.Typer) -> None:
    """Add the ``user`` command group to ``root``."""
    root.add_typer(app, name="user")
