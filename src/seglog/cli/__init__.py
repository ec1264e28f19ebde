"""The ``seglog`` command line: one typer app, one module per group of commands.

Each command module exposes ``register(app)``; this module only assembles them, so the
CLI stays the top layer (it may import broker, spark and storage; nothing imports it).

The client commands (produce, consume, topic, group, cluster, acl, quota, transactions,
console) import neither the storage engine nor the broker (quota and transactions: only the
broker's wire client, when they run): run as ``seglog <client command>``, only they are
assembled, so they start in a fraction of the time the whole CLI takes to import.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

__all__ = ["app", "build_app", "main"]

_CLIENT = (
    "_produce_cmd",
    "_consume_cmd",
    "_topic_cmds",
    "_group_cmds",
    "_cluster_cmd",
    "_acl_cmds",
    "_quota_cmds",
    "_txn_cmds",
    "_console_cmd",
    "_schema_cmds",
)
_FAST = {"produce": "seglog.cli._produce", "consume": "seglog.cli._consume"}
_CLIENT_NAMES = frozenset(
    {
        "produce",
        "consume",
        "topic",
        "group",
        "cluster",
        "acl",
        "quota",
        "transactions",
        "console",
        "schema",
    }
)
_ALL = (
    "_serve",
    "_log_cmds",
    "_bench",
    "_backup_cmds",
    "_maintenance",
    "_mirror_cmd",
    *_CLIENT[:5],
    "_user_cmds",
    *_CLIENT[5:],
)


def build_app(*, client_only: bool = False) -> typer.Typer:
    """The typer app with every command, or only the client commands."""
    import typer  # noqa: PLC0415 - not imported by the fast start of seglog produce

    app = typer.Typer(
        name="seglog",
        help="seglog: a durable segmented commit log: embedded, Kafka-wire broker, PySpark source.",
        no_args_is_help=True,
        add_completion=False,
    )
    for name in _CLIENT if client_only else _ALL:
        importlib.import_module(f"seglog.cli.{name}").register(app)
    return app


def __getattr__(name: str) -> Any:
    """``app``: the whole CLI, assembled on first use."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module 'seglog.cli' has no attribute {name!r}")


def main() -> None:
    """Entry point of the ``seglog`` console script. ``seglog produce`` and ``seglog
    consume`` first try their argparse start (``_fast``: no typer, 0.07 s instead of
    0.17 s); typer runs everything else, ``--help`` and usage errors."""
    fast = _FAST.get(sys.argv[1]) if len(sys.argv) > 1 else None
    if fast is not None and importlib.import_module(fast).run_fast(sys.argv[2:]):
        return
    client_only = len(sys.argv) > 1 and sys.argv[1] in _CLIENT_NAMES
    build_app(client_only=client_only)()
