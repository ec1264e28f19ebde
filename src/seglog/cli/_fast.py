"""The argparse start of ``seglog produce`` and ``seglog consume``: the common invocation
runs without building the typer app.

Why: typer 0.29 imports pydantic and builds a TypeAdapter per option before a command
runs, 0.11 s of a 0.17 s start, a tenth of producing 1 M lines and more than a tenth of
the gap to kcat (benchmarks/cli_vs_kcat.py). Each command's typer declaration stays the
source of ``--help`` and of usage errors: :func:`parse` returns None for anything argparse
does not accept, and ``main`` then runs typer. tests/cli/test_fast_start.py checks that
both parse the same options to the same values.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from seglog.cli._client_config import ClientOptions

__all__ = ["Parser", "parse", "run", "try_run"]

_CLIENT_FIELDS = (
    "brokers",
    "extra",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "ssl_ca_location",
)


class _NotFastError(Exception):
    """argparse met something it leaves to typer (help, a usage error, ...)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting, takes no
    abbreviated long options (click takes none) and has no ``-h``, plus the options of
    every client command (``_client._OPTION_PARAMS``)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog=prog, add_help=False, allow_abbrev=False)
        add = self.add_argument
        add("-b", "--brokers", "--bootstrap-server")
        add("-X", dest="extra", action="append")
        add("--security-protocol")
        add("--sasl-mechanism")
        add("--sasl-username")
        # click ignores an empty variable
        add("--sasl-password", default=os.environ.get("SEGLOG_SASL_PASSWORD") or None)
        add("--ssl-ca-location")

    def error(self, message: str) -> NoReturn:
        raise _NotFastError(message)


def parse(parser: Parser, argv: Sequence[str]) -> dict[str, Any] | None:
    """The command function's keyword arguments (``client`` a :class:`ClientOptions`)
    for ``argv``, or None when it is left to typer."""
    try:
        args = vars(parser.parse_intermixed_args(argv))
    except _NotFastError:
        return None
    client = {name: args.pop(name) for name in _CLIENT_FIELDS}
    client["extra"] = tuple(client["extra"] or ())
    return {**args, "client": ClientOptions(**client)}


def run(command: Callable[..., None], params: dict[str, Any]) -> None:
    """Call ``command(**params)`` and exit as typer would: the ``typer.Exit`` code of a
    failure (``_fail.fail``), "Aborted!" and 1 on a Ctrl-C the command let through, 1
    and no traceback when stdout's reader has gone."""
    try:
        command(**params)
    except BrokenPipeError:
        # the reader went away (``seglog consume ... | head``): exit 1 without a traceback,
        # as click does, with stdout on /dev/null so the interpreter's last flush succeeds
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    except Exception as exc:
        from typer import Exit  # noqa: PLC0415 - the error path only

        if isinstance(exc, Exit):
            sys.exit(exc.exit_code)
        raise


def try_run(parser: Parser, command: Callable[..., None], argv: Sequence[str]) -> bool:
    """``run`` the command with ``argv`` parsed by ``parser``; False (nothing done) when
    ``parse`` leaves ``argv`` to typer."""
    params = parse(parser, argv)
    if params is None:
        return False
    run(command, params)
    return True
