"""``fail``: how every client command reports an error and exits (typer's Exit).

Its own module, below ``_client`` and ``_client_config``, so the fast paths (``_fast``,
``_produce``, ``_consume``, ``_client_config``) import typer and rich only when they fail.
"""

from __future__ import annotations

import typer
from rich.console import Console

__all__ = ["err_console", "fail"]

err_console = Console(stderr=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; return the Exit to raise (exit status ``code``)."""
    err_console.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)
