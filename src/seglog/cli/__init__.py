"""The ``seglog`` command line: one typer app, one module per group of commands.

Each command module exposes ``register(app)``; this module only assembles them, so the
CLI stays the top layer (it may import broker, spark and storage; nothing imports it).
"""

from __future__ import annotations

import typer

from seglog.cli import (
    _acl_cmds,
    _backup_cmds,
    _bench,
    _cluster_cmd,
    _console_cmd,
    _consume_cmd,
    _group_cmds,
    _log_cmds,
    _maintenance,
    _mirror_cmd,
    _produce_cmd,
    _serve,
    _topic_cmds,
    _user_cmds,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="seglog",
    help="seglog: a durable segmented commit log — embedded, Kafka-wire broker, PySpark source.",
    no_args_is_help=True,
    add_completion=False,
)

_serve.register(app)
_log_cmds.register(app)
_bench.register(app)
_backup_cmds.register(app)
_maintenance.register(app)
_mirror_cmd.register(app)
_produce_cmd.register(app)
_consume_cmd.register(app)
_topic_cmds.register(app)
_group_cmds.register(app)
_cluster_cmd.register(app)
_user_cmds.register(app)
_acl_cmds.register(app)
_console_cmd.register(app)


def main() -> None:
    """Entry point of the ``seglog`` console script."""
    app()
