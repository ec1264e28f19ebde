"""The connection options of the client commands as data, without typer or rich: what
``seglog produce``'s fast start (``_produce.run_fast``) needs; ``_client`` re-exports it."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

__all__ = ["DEFAULT_BROKERS", "LOG_NOTICE", "ClientOptions", "print_json"]

DEFAULT_BROKERS = "127.0.0.1:9092"
LOG_NOTICE = 5
"""librdkafka's ``log_level`` (syslog severities) for the client commands: notice and worse."""


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    """The connection options every client command takes (see ``_client.client_command``)."""

    brokers: str | None = None
    extra: tuple[str, ...] = ()
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_location: str | None = None

    def config(self, **overrides: Any) -> dict[str, Any]:
        """The librdkafka configuration (``log_level`` 5: notices and worse on stderr);
        ``overrides`` first, then the options, then
        ``-X`` entries (which win). Raises ``typer.Exit(2)`` on a ``-X`` without ``=``."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.brokers
            or os.environ.get("SEGLOG_BROKERS")
            or DEFAULT_BROKERS,
            # librdkafka's informational lines (``%6|...``: "Purging 1 unserved events
            # from background queue" as an admin client is destroyed, "Disconnected")
            # are noise on a command's stderr; notices, warnings and errors still show
            # (``-X log_level=7`` brings back everything)
            "log_level": LOG_NOTICE,
            **overrides,
        }
        for key, value in (
            ("security.protocol", self.security_protocol),
            ("sasl.mechanism", self.sasl_mechanism),
            ("sasl.username", self.sasl_username),
            ("sasl.password", self.sasl_password),
            ("ssl.ca.location", self.ssl_ca_location),
        ):
            if value is not None:
                conf[key] = value
        for item in self.extra:
            key, sep, value = item.partition("=")
            if not sep or not key:
                from seglog.cli._fail import fail  # noqa: PLC0415 - typer only on errors

                raise fail(f"-X {item!r}: expected key=value", 2)
            conf[key.strip()] = value
        return conf


def print_json(value: object) -> None:
    """One JSON document on stdout (a line)."""
    sys.stdout.write(json.dumps(value, sort_keys=True) + "\n")
    sys.stdout.flush()
