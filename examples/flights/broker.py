"""Run ``seglog serve`` as a subprocess on a free loopback port, for the demo and its test.

A thin wrapper over the broker's own launcher (``seglog.broker.start_broker``):
``seglog serve --data-dir DIR --listen 127.0.0.1:<free port>`` (and its schema registry),
ready once it accepts TCP connections, stopped with SIGTERM (a clean shutdown) when the
block exits, normally or by an exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seglog.broker import start_broker

__all__ = ["BrokerError", "running_broker"]


class BrokerError(RuntimeError):
    """Raised when the broker subprocess does not start (its log in the message)."""


@contextmanager
def running_broker(
    data_dir: Path,
    log_path: Path,
    *,
    extra_args: tuple[str, ...] = (),
    schema_registry: bool = False,
) -> Iterator[str]:
    """Start ``seglog serve`` over ``data_dir``; yield its bootstrap ``"127.0.0.1:PORT"``.
    ``schema_registry``: also serve the schema registry on a free loopback port
    (``--schema-registry-listen 127.0.0.1:0``; clients find it through DescribeConfigs).

    The broker's stdout and stderr are appended to ``log_path``. Raises BrokerError if it
    does not accept connections within 30 s.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if schema_registry:
            extra_args = (*extra_args, "--schema-registry-listen", "127.0.0.1:0")
        broker = start_broker(data_dir, extra_args=extra_args, log_path=log_path)
    except RuntimeError as exc:
        raise BrokerError(str(exc)) from exc
    with broker:
        yield broker.bootstrap
